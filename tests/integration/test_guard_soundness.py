"""Dynamic graphs through the aot_eager backend: sizes and ints that capture made symbolic stay symbolic in AOT
autograd's graphs, so a later call with other values gets eager's answer (nothing bakes the first call's)."""

from __future__ import annotations

import torch

import dynajit.compiler as dc


def test_symbolic_int_scalar_argument_is_not_baked():
    def f(t1, t2, d):
        return torch.add(t1, t2, alpha=d)

    g = dc.compile(f, dynamic=True, backend="aot_eager")
    a, b = torch.ones(3), torch.ones(3)
    assert torch.equal(g(a, b, 5), f(a, b, 5))
    assert torch.equal(g(a, b, 6), f(a, b, 6))


def test_symbolic_sizes_are_not_baked():
    def f(x):
        return x.reshape(x.size(0) * 2, -1) + 1

    g = dc.compile(f, dynamic=True, backend="aot_eager")
    for rows in (4, 6, 2):
        x = torch.randn(rows, 6)
        torch.testing.assert_close(g(x), f(x))


def test_backward_through_a_dynamic_graph():
    def f(x, n):
        return (x.reshape(x.size(0), -1) * n).sum()

    g = dc.compile(f, dynamic=True, backend="aot_eager")
    for rows, n in ((4, 2), (5, 3)):
        x1 = torch.randn(rows, 3, requires_grad=True)
        x2 = x1.detach().clone().requires_grad_(True)
        g(x1, n).backward()
        f(x2, n).backward()
        torch.testing.assert_close(x1.grad, x2.grad)
