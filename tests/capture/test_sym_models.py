"""Library modules and idioms from torch.nn code: attention, transformer layers, module walks, generators."""

import collections
import math

import pytest
import torch
from torch import nn

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def run(m, *args):
    return m(*args)


def test_multihead_attention_is_one_graph(check, t):
    torch.manual_seed(0)
    m = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = t(2, 5, 8)
    check(run, m, x, x, x, graphs=1)


def test_transformer_encoder_layer_is_one_graph(check, t):
    torch.manual_seed(0)
    m = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()
    check(run, m, t(2, 5, 8), graphs=1)


class SplitMixing(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)
        self.forward = self.forward_scaled if mode == "scaled" else self.forward_split_cat

    def forward_scaled(self, x):
        return self.conv(x[:, :2]).repeat(1, 2, 1, 1) * 2

    def forward_split_cat(self, x):
        x1, x2 = torch.split(x, [2, 2], dim=1)
        return torch.cat((self.conv(x1), x2), 1)


def test_a_module_with_its_own_forward_attribute_is_one_graph(check, t):
    torch.manual_seed(0)
    m = nn.Sequential(SplitMixing("scaled"), nn.ReLU(), SplitMixing("split_cat")).eval()
    check(run, m, t(2, 4, 5, 5), graphs=1)


class PlainActivation(nn.Module):
    """No __init__ of its own (transformers' SiLUActivation): constructing it runs only nn.Module's."""

    def forward(self, x):
        return nn.functional.silu(x)


class Instantiator(dict):
    def __getitem__(self, key):
        return super().__getitem__(key)()  # transformers' ACT2FN: a new module at each lookup


ACTIVATIONS = Instantiator(silu=PlainActivation)


def activation_from_registry(x):
    y = x + 1
    return ACTIVATIONS["silu"](y) * 2


def activation_escapes(x):
    act = PlainActivation()
    return act(x), act


def test_a_plain_module_made_in_forward_is_one_graph(check, t):
    check(activation_from_registry, t(3, 4), graphs=1)
    compiled = capture.optimize(CompileCounter())(activation_escapes)
    out, act = compiled(torch.ones(2))
    assert type(act) is PlainActivation and act is not compiled(torch.ones(2))[1]  # made anew, as in eager
    torch.testing.assert_close(out, nn.functional.silu(torch.ones(2)))


def test_a_module_with_its_own_init_made_in_forward_is_a_break():
    class Counting(nn.Module):
        made = 0

        def __init__(self):
            super().__init__()
            Counting.made += 1

        def forward(self, x):
            return x + 1

    compiled = capture.optimize(CompileCounter())(lambda x: Counting()(x))
    compiled(torch.ones(2))
    assert Counting.made == 1  # its __init__ ran once, in Python: never while tracing


SCALES = {torch.Tensor: 2.0, int: 3, PlainActivation: 4}


def scaled_by_type(x):
    y = x.sin()
    scale = SCALES[type(x)] if type(x) in SCALES else 1  # `in` reads the whole dict: its keys are guarded
    return y * scale + len(SCALES) + sum(v for k, v in SCALES.items() if k is not int)


def test_a_dict_keyed_by_classes_is_read_in_one_graph(check, t):
    check(scaled_by_type, t(3), graphs=1)


def test_conv_block(check, t):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten()).eval()
    check(run, m, t(2, 3, 8, 8), graphs=1)


def test_embedding_and_norm(check):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Embedding(10, 4), nn.LayerNorm(4))
    check(run, m, torch.randint(0, 10, (2, 3)), graphs=1)


class Walker(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Sequential(nn.Linear(3, 3), nn.ReLU())

    def forward(self, x):
        n_linear = sum(1 for m in self.modules() if isinstance(m, nn.Linear))
        total = sum(p.sum() for p in self.parameters())
        names = [name for name, _ in self.named_children()]
        return self.b(self.a(x)) * n_linear + total, names


def test_module_walks(check, t):
    torch.manual_seed(0)
    check(run, Walker(), t(2, 3), graphs=1)


def squares(n):
    for i in range(n):
        yield i * i


def generator_consumers(x):
    return x * sum(squares(4)) + max(v for v in (1, 5, 2)), list(squares(3)), any(v > 3 for v in squares(3))


def test_generators_are_run_to_the_end(check, t):
    check(generator_consumers, t(3), graphs=1)


def ordered_dict_input(x, od):
    return x * od["a"] + sum(od.values())


def test_ordered_dict(check, t):
    check(ordered_dict_input, t(3), collections.OrderedDict(a=2, b=3), graphs=1)


def tensor_properties(x):
    return x * (not x.is_nested) + x.is_leaf + x.is_contiguous()


def test_tensor_properties(check, t):
    check(tensor_properties, t(3), graphs=1)


def test_zip_strict(check, t):
    def f(x):
        return [a * b for a, b in zip([x, x], [1, 2], strict=True)]

    check(f, t(3), graphs=1)


@pytest.mark.parametrize("train", [True, False])
def test_dropout_train_and_eval(check, t, train):
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.0)).train(train)
    check(run, m, t(2, 3), graphs=1)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU], ids=lambda c: c.__name__)
def test_recurrent_modules_run_eagerly(check, t, cls):
    # As torch.compile's default: the fused recurrent kernel is one aten call, and under AOT autograd its
    # undefined outputs could not be saved for backward.
    torch.manual_seed(0)
    check(run, cls(4, 4), t(3, 2, 4), graphs=0)


@pytest.mark.parametrize(
    "make", [lambda m: torch.jit.trace(m, torch.ones(1, 4)), torch.jit.script], ids=["traced", "scripted"]
)
def test_torchscript_modules_run_as_they_are(check, t, make):
    # A TorchScript module's class answers ``forward`` through a descriptor that raises: the compile failed with an
    # internal error; such a module is a break, around which the rest compiles.
    torch.manual_seed(0)
    module = make(nn.Linear(4, 3))
    check(lambda x: torch.relu(module(x * 2)) + 1, t(2, 4), graphs=2)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd=8, n_head=2, block=4):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def test_causal_self_attention(check, t):
    torch.manual_seed(0)
    check(run, CausalSelfAttention(), t(2, 4, 8), graphs=1)


class SlicedLayers(nn.Module):
    """The benchmark MLP's idiom: all layers but the last through a slice, then the last one."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = torch.nn.functional.gelu(layer(x))
        x = self.seq[1:](self.layers[-1](x))
        return x, len(self.layers[::2]), self.seq[:2][0](x)


def test_slicing_module_containers_is_one_graph(check, t):
    torch.manual_seed(0)
    check(run, SlicedLayers(), t(3, 4), graphs=1, calls=3)


def sliced_after_break(m, x):
    layers = m.layers[1:]
    print(end="")  # a graph break: the fresh ModuleList is handed to the resume function
    for layer in layers:
        x = layer(x)
    return x


def test_fresh_module_container_does_not_recompile(check, t):
    torch.manual_seed(0)
    counter = check(sliced_after_break, SlicedLayers(), t(3, 4), graphs=1, calls=4)
    assert counter.frame_count == 1
