"""Automatic dynamic shapes for tensors and ints held by objects (a KV cache that grows each decoding step)."""

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


class AttributeCache:
    def __init__(self):
        self.keys = torch.zeros(1, 0, 4)

    def update(self, k):
        self.keys = torch.cat([self.keys, k], dim=1)
        return self.keys


class LayerListCache:
    """transformers' DynamicCache shape: one tensor per layer in a list attribute."""

    def __init__(self, layers):
        self.key_cache = [torch.zeros(1, 0, 4) for _ in range(layers)]

    def update(self, k, layer):
        self.key_cache[layer] = torch.cat([self.key_cache[layer], k], dim=1)
        return self.key_cache[layer]


def attribute_step(x, cache):
    return (cache.update(x) * x).sum(1)


def list_step(x, cache):
    out = x
    for layer in range(2):
        out = (cache.update(out, layer) * out).sum(1, keepdim=True)
    return out


def decode(step, make_cache, steps, after_step=None, **options):
    """Run ``step`` compiled and eagerly on caches of their own, comparing each step (and the caches, with
    ``after_step(cache, eager_cache)``); the compile counter."""
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, **options)(step)
    cache, eager_cache = make_cache(), make_cache()
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randn(1, 1, 4, generator=gen)
        torch.testing.assert_close(compiled(x, cache), step(x.clone(), eager_cache))
        if after_step is not None:
            after_step(cache, eager_cache)
    return counter


# The cache grows 0, 1, 2, ...: sizes 0 and 1 are specialised (a graph each), the third compile is dynamic and
# serves every later length.
def test_attribute_tensor_that_grows_compiles_for_zero_one_and_then_dynamic():
    assert decode(attribute_step, AttributeCache, 8).frame_count == 3


def test_list_item_tensor_that_grows_compiles_for_zero_one_and_then_dynamic():
    assert decode(list_step, lambda: LayerListCache(2), 8).frame_count == 3


def test_without_automatic_dynamic_each_length_compiles():
    assert decode(attribute_step, AttributeCache, 4, dynamic=False).frame_count == 4


class FixedHolder:
    def __init__(self):
        self.weight = torch.arange(4.0)


def fixed_step(x, holder):
    return x * holder.weight


def test_attribute_tensor_of_fixed_size_stays_static():
    counter = decode(fixed_step, FixedHolder, 3)
    assert counter.frame_count == 1
    placeholders = [n for n in counter.graphs[0].graph.nodes if n.op == "placeholder"]
    assert all(not isinstance(n.meta["example_value"], torch.SymInt) for n in placeholders)
    assert all(not any(isinstance(s, torch.SymInt) for s in n.meta["example_value"].shape) for n in placeholders), (
        placeholders
    )


class CountingCache:
    """transformers' sliding-window cache layer: the tokens seen so far in an int attribute, updated each step."""

    def __init__(self):
        self.keys = torch.zeros(1, 0, 4)
        self.cumulative_length = 0

    def update(self, k):
        self.cumulative_length += k.shape[1]
        self.keys = torch.cat([self.keys, k], dim=1)[:, -3:]
        return self.keys


def counting_step(x, cache):
    keys = cache.update(x)
    return (keys * x).sum(1) * cache.cumulative_length + torch.arange(cache.cumulative_length).sum()


def _same_counter(cache, eager_cache):
    assert cache.cumulative_length == eager_cache.cumulative_length
    assert type(cache.cumulative_length) is int


def decode_counting(steps, **options):
    return decode(counting_step, CountingCache, steps, after_step=_same_counter, **options)


# The counter read through an attribute changes every step: once seen to change it is a symbolic graph input,
# as an int argument is, where each value compiled a graph of its own until the cache size limit ran the frame
# eagerly (Mistral's and Gemma 2's decoding).
def test_an_int_attribute_that_changes_becomes_symbolic_after_one_recompile():
    counter = decode_counting(12)
    # Counters 1 and 2 compile apart, as the kept keys of 1 and 2 do; the fourth compile comes when the keys are
    # first cut from a longer concatenation, whose batch stride no product of sizes gives (a symbol from then on),
    # as in TorchDynamo.
    assert counter.frame_count == 4
    placeholders = [n.meta["example_value"] for n in counter.graphs[-1].graph.nodes if n.op == "placeholder"]
    assert any(isinstance(e, torch.SymInt) for e in placeholders)


def test_without_automatic_dynamic_each_counter_value_compiles():
    assert decode_counting(5, dynamic=False).frame_count == 5


class Scaled(torch.nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale


def test_an_int_attribute_of_a_module_stays_a_constant_as_in_torchdynamo():
    capture.reset()
    counter = CompileCounter()
    step = capture.optimize(counter)(lambda module, x: module(x) + 1)
    for scale in (2, 3, 4):
        module, x = Scaled(scale), torch.randn(3)
        torch.testing.assert_close(step(module, x), module(x) + 1)
    assert counter.frame_count == 3
    for graph in counter.graphs:
        assert not any(
            isinstance(n.meta["example_value"], torch.SymInt) for n in graph.graph.nodes if n.op == "placeholder"
        )


class Settings:
    steps = 1


SETTINGS = Settings()


def test_an_int_attribute_of_a_global_stays_a_constant_as_in_torchdynamo():
    capture.reset()
    counter = CompileCounter()
    step = capture.optimize(counter)(lambda x: x * SETTINGS.steps)
    try:
        for steps in (2, 3, 4):
            SETTINGS.steps = steps
            torch.testing.assert_close(step(torch.ones(3)), torch.full((3,), float(steps)))
    finally:
        SETTINGS.steps = 1
    assert counter.frame_count == 3
