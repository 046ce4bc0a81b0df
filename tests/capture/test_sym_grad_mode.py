"""Grad mode changed by plain calls: ``torch.set_grad_enabled(b)`` sets the mode when called, as in eager.

Each case runs eagerly and compiled from the same starting mode and compares the results (their
``requires_grad`` included), the grad mode the call leaves behind, and the number of graphs.
"""

from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def set_then_reset(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y, x * 3, torch.is_grad_enabled()


def left_disabled(x):
    torch.set_grad_enabled(False)
    return x * 2


def left_enabled(x):
    torch.set_grad_enabled(True)
    return x * 2, torch.is_grad_enabled()


def autograd_spelling(x):
    torch.autograd.set_grad_enabled(mode=False)
    y = x * 2
    disabled = torch.is_grad_enabled()
    torch.autograd.set_grad_enabled(True)
    return y, disabled


def c_level_call(x):
    torch._C._set_grad_enabled(False)
    y = x * 2
    torch._C._set_grad_enabled(True)
    return y, x + 1


def as_block(x):
    with torch.set_grad_enabled(False):
        y = x * 2
        inside = torch.is_grad_enabled()
    return y, x * 2, inside


def set_in_a_called_function(x):
    def switch_off():
        torch.set_grad_enabled(False)

    switch_off()
    return x * 2, torch.is_grad_enabled()


def block_restores_mode_found_at_the_call(x):
    manager = torch.set_grad_enabled(False)
    y = x * 2  # already disabled: the call set it
    torch.set_grad_enabled(True)
    with manager:
        z = x * 3
    return y, z, torch.is_grad_enabled()


def set_before_a_break(x):
    torch.set_grad_enabled(False)
    y = x * 2
    print(end="")
    return y, x * 3


def _outcome(fn: Any, x: torch.Tensor, grad: bool) -> tuple[Any, bool]:
    torch.set_grad_enabled(grad)
    try:
        return fn(x), torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.requires_grad == b.requires_grad
            and (a.grad_fn is None) == (b.grad_fn is None)
            and torch.equal(a.detach(), b.detach())
        )
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize(
    "fn",
    [
        set_then_reset,
        left_disabled,
        left_enabled,
        autograd_spelling,
        c_level_call,
        as_block,
        set_in_a_called_function,
        block_restores_mode_found_at_the_call,
    ],
)
def test_grad_mode_set_by_a_call(fn, grad):
    capture.reset()
    x = torch.randn(3, requires_grad=True)
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(fn)
    for _ in range(2):
        expected, eager_mode = _outcome(fn, x, grad)
        got, compiled_mode = _outcome(compiled, x, grad)
        assert _same(got, expected), (got, expected)
        assert compiled_mode == eager_mode
    assert counter.frame_count == 1


def test_grad_mode_set_before_a_break():
    capture.reset()
    x = torch.randn(3, requires_grad=True)
    counter = CompileCounter()
    compiled = capture.optimize(counter)(set_before_a_break)
    expected, eager_mode = _outcome(set_before_a_break, x, True)
    got, compiled_mode = _outcome(compiled, x, True)
    assert _same(got, expected) and compiled_mode == eager_mode
    assert counter.frame_count == 2


def test_grad_disabled_by_a_call_has_no_backward():
    capture.reset()

    def f(x):
        torch.set_grad_enabled(False)
        y = (x * 2).sum()
        torch.set_grad_enabled(True)
        return y + (x * 3).sum()

    x = torch.randn(3, requires_grad=True)
    f(x).backward()
    expected = x.grad.clone()
    x.grad = None
    capture.optimize(CompileCounter(), fullgraph=True)(f)(x).backward()
    torch.testing.assert_close(x.grad, expected)


def test_set_grad_enabled_needs_a_bool():
    capture.reset()

    def f(x):
        torch.set_grad_enabled(1)
        return x

    with pytest.raises(TypeError):
        f(torch.ones(1))
    torch.set_grad_enabled(True)
    with pytest.raises(TypeError):
        capture.optimize(CompileCounter())(f)(torch.ones(1))
    assert torch.is_grad_enabled()


def view_made_in_an_enable_grad_block(x):
    with torch.enable_grad():
        v = x.select(0, -1)
    v.unsqueeze_(0)  # a graph break (a layout change of an input's view without gradients)
    return v * 2, v.squeeze(), torch.is_grad_enabled()


def test_the_mode_after_a_graph_that_ends_in_its_views_mode():
    # The graph ends in the mode its returned view was made in (enable_grad), and the frame stopped in the mode
    # it started in (no_grad): the transformed code set nothing after the graph, so the code after the break
    # ran with gradients and the gradient reached the leaf, where eager records none.
    def run(fn):
        leaf = torch.ones(2, 1, requires_grad=True)
        x = leaf.clone()
        with torch.no_grad():
            doubled, squeezed, mode = fn(x)
        for out in (doubled, squeezed):
            if out.requires_grad:
                out.sum().backward()
        return [(t.requires_grad, t.grad_fn is None) for t in (doubled, squeezed)], mode, leaf.grad

    capture.reset()
    compiled = capture.optimize(CompileCounter())(view_made_in_an_enable_grad_block)
    assert run(compiled) == run(view_made_in_an_enable_grad_block)
