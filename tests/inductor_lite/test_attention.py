"""Written-out attention rewritten as the fused kernel: which spellings qualify, which do not, and that both agree."""

import math

import pytest
import torch
import torch.nn.functional as F
from ilite_helpers import check
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from dynajit.inductor_lite._attention import fuse_attention

SDPA = F.scaled_dot_product_attention

FUSED = {
    "div_scores": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(16), dim=-1) @ v,
    "mul_scores": lambda q, k, v: F.softmax(torch.matmul(q, k.transpose(-1, -2)) * 0.125, dim=-1) @ v,
    "scaled_q": lambda q, k, v: (q * 0.3).matmul(k.transpose(2, 3)).softmax(-1).matmul(v),
    "unscaled": lambda q, k, v: torch.matmul(torch.softmax(q @ k.transpose(-2, -1), 3), v),
    "swapaxes": lambda q, k, v: torch.softmax(q @ k.swapaxes(-1, -2) * 0.25, -1) @ v,
}  # fmt: skip

UNCHANGED = {
    "softmax_over_queries": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1), dim=2) @ v,
    "masked": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) + torch.ones(8, 8).triu(1) * -1e9, -1) @ v,
    "scores_returned": lambda q, k, v: (lambda s: (torch.softmax(s, -1) @ v, s))(q @ k.transpose(-2, -1)),
    "dropout": lambda q, k, v: F.dropout(torch.softmax(q @ k.transpose(-2, -1), -1), 0.0) @ v,
    "broadcast_key": lambda q, k, v: torch.softmax(q @ k[:1].transpose(-2, -1), -1) @ v,
    "not_a_transpose": lambda q, k, v: torch.softmax(q @ k.transpose(1, 2).reshape(2, 3, 16, 8), -1) @ v,
    "scale_by_tensor": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) * q.sum(), -1) @ v,
}  # fmt: skip


def _traced(fn, *inputs):
    gm = torch.fx.symbolic_trace(fn)
    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*inputs)
    return gm


def _qkv(dtype=torch.float32, requires_grad=False):
    torch.manual_seed(0)
    return [torch.randn(2, 3, 8, 16, dtype=dtype, requires_grad=requires_grad) for _ in range(3)]


def _fused_calls(gm):
    return sum(n.op == "call_function" and n.target is SDPA for n in gm.graph.nodes)


@pytest.mark.parametrize("name", FUSED)
def test_written_out_attention_becomes_one_fused_call_and_agrees_with_eager(name):
    qkv = _qkv()
    gm = _traced(FUSED[name], *qkv)
    before = str(gm.graph)
    fused = fuse_attention(gm)
    assert _fused_calls(fused) == 1
    assert not any(n.target in (torch.softmax, F.softmax, "softmax") for n in fused.graph.nodes)
    assert str(gm.graph) == before  # the caller's graph is left as it was
    torch.testing.assert_close(fused(*qkv), FUSED[name](*qkv), atol=1e-5, rtol=1e-5)
    check(FUSED[name], *qkv, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", UNCHANGED)
def test_attention_that_differs_from_the_fused_kernel_is_left_alone(name):
    qkv = _qkv()
    gm = _traced(UNCHANGED[name], *qkv)
    assert fuse_attention(gm) is gm and _fused_calls(gm) == 0
    check(UNCHANGED[name], *qkv, atol=1e-5, rtol=1e-5)


def test_only_float32_attention_is_fused():
    # In 16-bit types eager rounds the score matrix and the fused kernel does not: not the same function.
    qkv = _qkv(torch.bfloat16)
    assert _fused_calls(fuse_attention(_traced(FUSED["div_scores"], *qkv))) == 0


def test_fused_attention_trains_with_eager_gradients():
    fn = FUSED["div_scores"]
    eager_inputs = _qkv(requires_grad=True)
    compiled_inputs = [t.detach().clone().requires_grad_() for t in eager_inputs]
    gm = _traced(lambda q, k, v: (fn(q, k, v),), *[t.detach() for t in eager_inputs])
    fused = fuse_attention(gm)
    assert _fused_calls(fused) == 1
    from dynajit.inductor_lite import compile_fx

    compiled = compile_fx(gm, compiled_inputs)
    out = compiled(*compiled_inputs)[0]
    expected = fn(*eager_inputs)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    out.square().sum().backward()
    expected.square().sum().backward()
    for a, e in zip(compiled_inputs, eager_inputs):
        torch.testing.assert_close(a.grad, e.grad, atol=1e-5, rtol=1e-5)
