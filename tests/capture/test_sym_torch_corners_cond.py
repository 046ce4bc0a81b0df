"""``torch.cond``: a predicate known while tracing (a constant, a size comparison) inlines the branch it picks;
a tensor predicate makes both branches subgraphs of one ``cond`` node, which runs the one the data picks."""

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


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["true", "false"])
def test_a_tensor_predicate_runs_the_branch_the_data_picks(sign):
    run_both(tensor_pred, lambda: (sign * torch.rand(3),), graphs=1, fullgraph=True)


LINEAR = torch.nn.Linear(3, 3)
OFFSET = torch.randn(3)


def reads_enclosing_tensors(x, y):
    before = y * 2  # computed in the graph before the call
    return torch.cond(
        x.max() > y.min(),
        lambda a, b: (LINEAR(a).relu() + OFFSET, b * before),
        lambda a, b: (a - OFFSET, (b + before).sin()),
        (x, y),
    )


@pytest.mark.parametrize("shift", [2.0, -2.0], ids=["true", "false"])
def test_branches_read_module_weights_globals_and_earlier_results(shift):
    run_both(reads_enclosing_tensors, lambda: (torch.randn(2, 3) + shift, torch.randn(2, 3)), graphs=1, fullgraph=True)


def test_gradients_flow_through_the_branch_taken():
    def loss(x, w):
        out = torch.cond(x.sum() > 0, lambda a, b: (a * b).sin(), lambda a, b: a.exp() - b, (x, w))
        return out.sum()

    for shift in (2.0, -2.0):
        run_both(
            loss,
            lambda: (torch.randn(4).add(shift).requires_grad_(), torch.randn(4).requires_grad_()),
            graphs=1,
            fullgraph=True,
            backward=True,
        )


def test_a_global_a_branch_reads_is_read_at_each_call():
    def fn(x):
        return torch.cond(x.sum() > 0, lambda a: a + OFFSET, lambda a: a - OFFSET, (x,))

    global OFFSET
    saved = OFFSET
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(fn)
    x = torch.rand(3)
    try:
        torch.testing.assert_close(compiled(x), fn(x))
        OFFSET = torch.full((3,), 100.0)
        torch.testing.assert_close(compiled(x), fn(x))
    finally:
        OFFSET = saved
    assert counter.frame_count == 1  # a global tensor is a graph input, read from the module at each call


SEEN = []


def effect_in_branch(x):
    def remember(a):
        SEEN.append(1)
        return a + 1

    return torch.cond(x.sum() > 0, remember, lambda a: a - 1, (x,))


def nested(x):
    return torch.cond(
        x.sum() > 0, lambda a: torch.cond(a.max() > 1, lambda b: b * 2, lambda b: b / 2, (a,)), lambda a: -a, (x,)
    )


def test_a_branch_with_a_python_side_effect_or_a_nested_cond_is_a_break_naming_why():
    run_both(effect_in_branch, lambda: (torch.randn(3),))
    assert breaks(effect_in_branch, torch.rand(3)) == [
        "a torch.cond branch has a Python side effect (it must be a function of its operands)"
    ]
    assert breaks(nested, torch.rand(3)) == [
        "torch.cond inside a torch.cond branch (a nested higher-order op) is not traced"
    ]


def bad_arguments(x):
    return torch.cond(True, true_branch, false_branch, (x,), 5)
