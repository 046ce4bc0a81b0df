"""torch.Size is its own type while tracing: arguments, ``x.shape`` / ``x.size()`` (static or symbolic) and
``torch.Size(...)`` answer ``isinstance(s, torch.Size)`` as Python does, and a Size argument is guarded by type."""

from __future__ import annotations

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def test_size_argument_is_a_size(check, t):
    def f(x, s):
        return x + 1, isinstance(s, torch.Size), type(s).__name__, s

    x = t(3, 4)
    check(f, x, x.shape, graphs=1)


def test_size_argument_then_a_tuple_recompiles():
    def f(x, s):
        return x + 1, isinstance(s, torch.Size)

    capture.reset()
    counter = CompileCounter()
    g = capture.optimize(counter)(f)
    x = torch.ones(3)
    assert g(x, torch.Size([3]))[1] is True
    assert g(x, (3,))[1] is False
    assert counter.frame_count == 2


def test_symbolic_shapes_and_sizes_are_sizes(t):
    def f(x):
        s, z = x.shape, x.size()
        return (
            x.view(s[0], -1) * 2,
            isinstance(s, torch.Size),
            isinstance(z, torch.Size),
            type(s[1:]).__name__,
            type(s + (1,)).__name__,  # noqa: RUF005  (Size + tuple is what is tested)
            type((1,) + s).__name__,  # noqa: RUF005
            s.numel() == x.numel(),
            s,
        )

    capture.reset()
    counter = CompileCounter()
    x = t(3, 4)
    actual = capture.optimize(counter, dynamic=True)(f)(x)
    expected = f(x)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1:] == expected[1:] and type(actual[-1]) is torch.Size
    assert counter.frame_count == 1


def test_size_built_from_symbolic_sizes(t):
    def f(x):
        s = torch.Size([x.size(0), 2])
        return x.new_zeros(s), isinstance(s, torch.Size), s

    capture.reset()
    counter = CompileCounter()
    x = t(3, 4)
    actual = capture.optimize(counter, dynamic=True)(f)(x)
    assert actual[1:] == f(x)[1:] and type(actual[2]) is torch.Size
    assert actual[0].shape == (3, 2) and counter.frame_count == 1
