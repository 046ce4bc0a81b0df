"""autograd.Function calls under AOT autograd backends: forward values and gradients equal eager's."""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
import dynajit.compiler._compile
from dynajit.capture.testing import CompileCounterWithBackend


class StraightThroughRound(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class ScaledSquare(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return x * x * scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * ctx.scale * x * grad + 1, None


def model(x, w):
    h = StraightThroughRound.apply(x @ w)
    return ScaledSquare.apply(h.tanh(), 0.5).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_gradients_through_functions_equal_eager(backend):
    capture.reset()
    counter = CompileCounterWithBackend(dynajit.compiler._compile.resolve_backend(backend))
    compiled = capture.optimize(counter, fullgraph=True)(model)
    torch.manual_seed(0)
    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 2, requires_grad=True)
    cx, cw = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    expected = model(x, w)
    expected.backward()
    actual = compiled(cx, cw)
    actual.backward()
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(cx.grad, x.grad)
    torch.testing.assert_close(cw.grad, w.grad)
    assert counter.frame_count == 1
