"""autograd.Function calls under AOT autograd backends: forward values and gradients equal eager's."""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
import dynajit.compiler._compile
from dynajit.capture.testing import CompileCounterWithBackend


class PassThroughClamp(torch.autograd.Function):
    """Clamps forward; the gradient passes unchanged where autograd's own rule would zero it."""

    @staticmethod
    def forward(ctx, x, bound):
        return x.clamp(-bound, bound)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Cube(torch.autograd.Function):
    """Saves its input; its backward is off by a constant, so only this backward gives these gradients."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x * x * grad + 0.25


def model(x, w):
    h = PassThroughClamp.apply(x @ w, 0.5)
    return Cube.apply(h.tanh()).sum()


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
