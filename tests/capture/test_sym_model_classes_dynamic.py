"""Automatic dynamic shapes for tensors held by objects (a KV cache that grows each decoding step)."""

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


def decode(step, make_cache, steps, **options):
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, **options)(step)
    cache, eager_cache = make_cache(), make_cache()
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        x = torch.randn(1, 1, 4, generator=gen)
        torch.testing.assert_close(compiled(x, cache), step(x.clone(), eager_cache))
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
