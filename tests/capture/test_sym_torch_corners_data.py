"""``tensor.data = other``: the graph computes ``other``, the assignment is replayed on the real tensor after it,
and a later use of the tensor in the same trace is a graph break (its fake describes the old storage)."""

import torch
from torch_corners import breaks, run_both

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _leaf():
    return (torch.randn(4, requires_grad=True), torch.randn(4))


def halve(w, x):
    w.data = w.data * 0.5
    return x + 1


def test_assigning_data_then_leaving_the_tensor_alone_is_one_graph():
    run_both(halve, _leaf, graphs=1, fullgraph=True)


def resized(w, x):
    w.data = torch.cat([x, x])
    return x * 2


def test_the_tensor_takes_the_new_size_and_the_next_call_sees_it():
    counter = CompileCounter()
    compiled = capture.optimize(counter)(resized)
    for f in (resized, compiled):
        w, x = _leaf()
        f(w, x)
        assert w.shape == (8,) and w.requires_grad and w.is_leaf
        torch.testing.assert_close(w.detach(), torch.cat([x, x]))
        f(w, x)  # the tensor the first call changed
        assert w.shape == (8,)
    assert counter.frame_count >= 1


class Clamped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 3)
        self.b = torch.nn.Linear(3, 2)

    def forward(self, x):
        for p in self.parameters():
            p.data = p.data.clamp(-0.2, 0.2)
        return x.sum()


def test_clamping_every_parameter_through_data_is_one_graph():
    counter = CompileCounter()
    torch.manual_seed(0)
    eager, compiled_model = Clamped(), Clamped()
    compiled_model.load_state_dict(eager.state_dict())
    compiled = capture.optimize(counter, fullgraph=True)(compiled_model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), eager(x))
    for got, want in zip(compiled_model.parameters(), eager.parameters()):
        torch.testing.assert_close(got.detach(), want.detach())
        assert type(got) is torch.nn.Parameter and got.requires_grad
    assert counter.frame_count == 1


def shares_then_writes(w, x):
    y = x * 3
    w.data = y
    y.add_(1)
    return y


def test_the_tensor_shares_the_new_storage_and_sees_later_writes_to_it():
    run_both(shares_then_writes, _leaf, graphs=1, fullgraph=True)
    w, x = _leaf()
    y = capture.optimize(CompileCounter())(shares_then_writes)(w, x)
    assert w.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()


def computed(x):
    y = x * 2
    y.data = x[:2] + 1
    return y


def test_the_data_of_a_computed_tensor_is_replaced_on_the_returned_object():
    run_both(computed, lambda: (torch.randn(4),), graphs=1, fullgraph=True)
    run_both(computed, lambda: (torch.randn(4, requires_grad=True),), graphs=1, fullgraph=True)


def used_with_grad_then_assigned(w, x):
    y = (w * w).sum()
    w.data = x
    return y


def test_a_tensor_requiring_grad_used_before_the_assignment_is_left_to_python():
    # Eager's backward reads the saved leaf's new data; a graph would have saved the old.
    run_both(used_with_grad_then_assigned, _leaf, backward=True)
    reasons = breaks(used_with_grad_then_assigned, *_leaf())
    assert reasons == ["assigning Tensor.data of a tensor requiring grad that the graph has already used"]


def integers_into_a_leaf(w, x):
    w.data = x.long()
    return x


def not_a_tensor(w, x):
    w.data = 5
    return x


def test_what_eager_refuses_raises_the_same():
    run_both(integers_into_a_leaf, _leaf)
    run_both(not_a_tensor, _leaf)
