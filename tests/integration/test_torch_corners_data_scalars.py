"""Graphs reading values from tensor data (capture_scalar_outputs, capture_dynamic_output_shape_ops) on AOT backends."""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
import dynajit.compiler._compile
from dynajit.capture import config
from dynajit.capture.testing import CompileCounterWithBackend


def scaled_loss(x, w):
    scale = x.detach().abs().max().item()
    return ((x @ w) * scale).sum()


def data_sized(x, k):
    n = k.sum().item()
    torch._check(n >= 0)
    torch._check(n <= x.shape[0])
    return x[:n].sin() * 2, torch.zeros(n) + n


def masked(x):
    picked = x[x > 0]
    return picked * 2, picked.shape[0], torch.nonzero(x < 0)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_values_read_from_data_on_aot_backends(backend):
    capture.reset()
    counter = CompileCounterWithBackend(dynajit.compiler._compile.resolve_backend(backend))
    with config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        torch.manual_seed(0)
        x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3, 2, requires_grad=True)
        cx, cw = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        compiled = capture.optimize(counter, fullgraph=True)(scaled_loss)
        expected, actual = scaled_loss(x, w), compiled(cx, cw)
        expected.backward()
        actual.backward()
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(cx.grad, x.grad)
        torch.testing.assert_close(cw.grad, w.grad)

        sized = capture.optimize(counter, fullgraph=True)(data_sized)
        for k in (torch.tensor([1, 2]), torch.tensor([4, 1])):
            x = torch.randn(6)
            torch.testing.assert_close(sized(x, k), data_sized(x, k))

        mask = capture.optimize(counter, fullgraph=True)(masked)
        for _ in range(2):
            x = torch.randn(8)
            got, want = mask(x), masked(x)
            torch.testing.assert_close(got[0], want[0])
            assert got[1] == want[1]
            torch.testing.assert_close(got[2], want[2])
    assert counter.frame_count == 3


def solved_size(x, k):
    # `k` (0-d) read as a size, then the view to x's shape solves its symbol: every example value is static,
    # yet the graph reads data, so the AOT backends must trace it with the placeholders' ShapeEnv
    z = x.new_zeros((x.shape[0], k + 1, 4, 3))
    return z.view(x.shape[0], x.shape[1], 3) + x


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_value_read_from_data_whose_symbol_is_solved(backend):
    capture.reset()
    counter = CompileCounterWithBackend(dynajit.compiler._compile.resolve_backend(backend))
    with config.patch(capture_scalar_outputs=True):
        compiled = capture.optimize(counter, fullgraph=True)(solved_size)
        x, k = torch.randn(2, 8, 3), torch.tensor(1)
        torch.testing.assert_close(compiled(x, k), solved_size(x, k))
    assert counter.frame_count == 1
