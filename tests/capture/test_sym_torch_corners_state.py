"""Tensor state user code reads and writes: ``.data``, ``.grad`` and Python attributes of tensor objects."""

import pytest
import torch
from torch_corners import breaks, run_both

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def leaf_with_grad():
    p = torch.randn(4, requires_grad=True)
    p.grad = torch.randn(4)
    return (p,)


def leaf_without_grad():
    return (torch.randn(4, requires_grad=True),)


def clear_grad(p):
    p.grad = None
    return p * 2


def read_grad(p):
    if p.grad is None:
        return p * 2
    return p.grad * 3 + p


def write_then_read_grad(p, x):
    p.grad = x * 2
    return p.grad + 1


def wrong_grad(p):
    p.grad = torch.zeros(2)
    return p * 2


def computed_grad(x):
    y = x * 2
    return y.grad is None, y + 1


def test_clearing_a_grad_is_replayed_on_the_tensor():
    run_both(clear_grad, leaf_with_grad, graphs=1, fullgraph=True)


def test_a_grad_read_is_a_graph_input_guarded_by_its_presence():
    counter = CompileCounter()
    for make in (leaf_with_grad, leaf_without_grad, leaf_with_grad):
        run_both(read_grad, make, backend=counter, fullgraph=True)
    # (run_both resets between calls: each run compiles once, each with the branch its grad decides)
    assert counter.frame_count == 3
    capture.reset()
    counter.clear()
    compiled = capture.optimize(counter, fullgraph=True)(read_grad)
    (p,) = leaf_with_grad()
    torch.testing.assert_close(compiled(p), read_grad(p))
    p.grad = None
    torch.testing.assert_close(compiled(p), read_grad(p))  # the guard on p.grad sends this call to a new entry
    assert counter.frame_count == 2


def test_a_written_grad_is_read_back_and_set_on_the_tensor():
    run_both(write_then_read_grad, lambda: (*leaf_without_grad(), torch.randn(4)), graphs=1, fullgraph=True)
    run_both(wrong_grad, leaf_with_grad)  # a gradient of the wrong size raises as in eager


def test_a_computed_tensor_has_no_grad():
    with pytest.warns(UserWarning):  # eager and compiled both read .grad of a non-leaf
        run_both(computed_grad, leaf_without_grad, graphs=1, fullgraph=True)


def data_mul_(x):
    x.data.mul_(2)
    return x + 1


def data_read(x):
    d = x.data
    return d + 1, d.requires_grad


def sgd_step(model, x, lr):
    loss = model(x).sum()
    for p in model.parameters():
        p.data.add_(p.grad, alpha=-lr)
        p.grad = None
    return loss


def make_model_with_grads():
    model = torch.nn.Linear(3, 2)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    return model, torch.randn(5, 3), 0.1


def test_data_is_a_detached_alias_whose_changes_reach_the_tensor():
    run_both(data_mul_, leaf_without_grad, graphs=1, fullgraph=True, backward=False)
    run_both(data_read, leaf_without_grad, graphs=1, fullgraph=True)


def test_an_optimizer_step_through_data_and_grad_is_one_graph():
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(sgd_step)
    torch.manual_seed(0)
    eager_args = make_model_with_grads()
    torch.manual_seed(0)
    compiled_args = make_model_with_grads()
    torch.testing.assert_close(compiled(*compiled_args), sgd_step(*eager_args))
    for got, want in zip(compiled_args[0].parameters(), eager_args[0].parameters()):
        torch.testing.assert_close(got.detach(), want.detach())
        assert got.grad is None and want.grad is None
    assert counter.frame_count == 1


def assign_data(w):
    w.data = w.data * 0.5
    return w + 1


def test_reading_a_tensor_after_assigning_its_data_is_a_break_with_its_reason():
    # The graph assigns; the read (w + 1), where the trace breaks, runs in Python after the assignment.
    run_both(assign_data, leaf_without_grad, graphs=1)
    assert breaks(assign_data, torch.randn(3)) == [
        "a tensor is used after its Tensor.data was assigned in the same graph (l_w)"
    ]
    run_both(set_tensor_property, lambda: (torch.randn(4),))
    assert breaks(set_tensor_property, torch.randn(4)) == ["setting Tensor.requires_grad"]


def flag_argument(x):
    x.requires_grad_()
    return x * 2


def flag_through_the_class(x):
    torch.Tensor.requires_grad_(x, True)
    return x * 2


def flag_of_a_computed_value(x):
    y = (x + 1).requires_grad_(requires_grad=True)
    return y * 3


def flag_unchanged(x):
    x.requires_grad_(x.requires_grad)
    return x * 2


@pytest.mark.parametrize("fn", [flag_argument, flag_through_the_class, flag_of_a_computed_value])
def test_requires_grad_that_changes_the_flag_is_a_break_with_its_reason(fn):
    # A backend traces functional copies of the graph's inputs: a flag set inside the graph reached neither the
    # caller's tensor nor the history of what was computed from it.
    run_both(fn, lambda: (torch.randn(4),))
    assert breaks(fn, torch.randn(4)) == ["Tensor.requires_grad_ changes whether autograd records the tensor"]


def retained(x):
    y = x * 2
    torch.Tensor.retain_grad(y)
    return y * 3


def test_retain_grad_is_a_break_with_its_reason():
    run_both(retained, lambda: (torch.randn(4, requires_grad=True),))
    assert breaks(retained, torch.randn(4, requires_grad=True)) == [
        "Tensor.retain_grad() changes what autograd keeps of the tensor"
    ]


@pytest.mark.parametrize("grad", [False, True])
def test_requires_grad_that_keeps_the_flag_stays_in_the_graph(grad):
    run_both(flag_unchanged, lambda: (torch.randn(4, requires_grad=grad),), graphs=1, fullgraph=True)
    assert breaks(flag_unchanged, torch.randn(4, requires_grad=grad)) == []


def tag_inside(x):
    x.tag = 1
    return x + x.tag


def tag_computed(x):
    y = x * 2
    y.tag = "doubled"
    y.tag = y.tag + "!"
    return y, hasattr(y, "tag")


def tag_read(x):
    return x * x.tag


def tag_or_default(x):
    return x + getattr(x, "tag", 10)


def tagged(value):
    def make():
        x = torch.randn(4)
        x.tag = value
        return (x,)

    return make


def test_tensor_attributes_set_in_the_function_and_before_it():
    run_both(tag_inside, lambda: (torch.randn(4),), graphs=1, fullgraph=True)
    run_both(tag_computed, lambda: (torch.randn(4),), graphs=1, fullgraph=True)
    # Set before the call: read and guarded by value.
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=True)(tag_read)
    (x,) = tagged(2)()
    torch.testing.assert_close(compiled(x), tag_read(x))
    x.tag = 3
    torch.testing.assert_close(compiled(x), tag_read(x))
    assert counter.frame_count == 2
    run_both(tag_or_default, tagged(5), graphs=1, fullgraph=True)
    run_both(tag_or_default, lambda: (torch.randn(4),), graphs=1, fullgraph=True)


def set_tensor_property(x):
    x.requires_grad = True
    return x * 2
