"""``torch.cond``: a predicate known while tracing (a constant, a size comparison) inlines the branch it picks."""

import pytest
import torch
from torch_corners import breaks, run_both

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def true_branch(a, b):
    return a.sin() + b


def false_branch(a, b):
    return a.cos() - b


def const_pred(x, y):
    return torch.cond(True, true_branch, false_branch, (x, y)), torch.cond(0, true_branch, false_branch, [x, y])


def closures(x, y):
    scale = 3.0
    return torch.cond(pred=False, true_fn=lambda a: a * scale + y, false_fn=lambda a: a - scale * y, operands=(x,))


def size_pred(x):
    return torch.cond(x.shape[0] > 4, lambda a: a.sum(0), lambda a: a.mean(0), (x,))


def tensor_pred(x):
    return torch.cond(x.sum() > 0, lambda a: a + 1, lambda a: a - 1, (x,))


def pair():
    return torch.randn(3), torch.randn(3)


def test_a_constant_predicate_inlines_its_branch():
    run_both(const_pred, pair, graphs=1, fullgraph=True)
    run_both(closures, pair, graphs=1, fullgraph=True)
    with pytest.raises(TypeError):
        bad_arguments(torch.randn(2))
    run_both(bad_arguments, lambda: (torch.randn(2),))  # wrong arguments raise as in eager


def test_a_predicate_on_sizes_is_decided_and_guarded():
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True, dynamic=True)(size_pred)
    for rows in (6, 7, 2, 3):
        x = torch.randn(rows, 2)
        torch.testing.assert_close(compiled(x), size_pred(x))
    assert counter.frame_count == 2  # one entry per branch


def test_a_tensor_predicate_is_a_break_naming_why():
    run_both(tensor_pred, lambda: (torch.randn(3),))
    assert breaks(tensor_pred, torch.randn(3)) == [
        "torch.cond with a tensor predicate: capture does not trace its branches into subgraphs "
        "(the call runs in Python)"
    ]


def bad_arguments(x):
    return torch.cond(True, true_branch, false_branch, (x,), 5)
