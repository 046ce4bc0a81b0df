"""Values read from tensor data under capture_scalar_outputs / capture_dynamic_output_shape_ops (off: breaks)."""

import pytest
import torch
from torch_corners import breaks, run_both

from dynajit.capture import config


@pytest.fixture
def capture_data():
    with config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield


def scale_by_item(x):
    return x * x.sum().item()


def return_item(x):
    n = x.sum().item()
    return x + 1, n, n * 2, n > 0


def int_item(x, k):
    n = k.sum().item()
    torch._check(n >= 0)
    torch._check(n <= x.shape[0])
    return torch.zeros(n) + 1, x[:n] * 2


def tolist(x):
    a, b, c = x.tolist()
    return x * a + b * c


def nested_tolist(x):
    rows = x.tolist()
    return rows, x * rows[1][0]


def branch_on_item(x):
    n = x.sum().item()
    if n > 0:
        return x + 1
    return x - 1


def nonzero(x):
    return torch.nonzero(x > 0.5), x[x > 0].sum()


def mask_then_size(x):
    y = x[x > 0]
    return y * 2, y.shape[0], y.shape[0] + 1


def failing_check(x, k):
    n = k.sum().item()
    torch._check(n < 3)
    return x * n


def tensor_as_size(x, k):
    # the 0-d tensor `k` where new_zeros expects an int: eager reads its value (longformer's `chunks_count`)
    return x.new_zeros((2, k + 1)) + x.sum()


def size_from_constants(x):
    # torch.div of two ints is a tensor whose value the trace knows: view reads it as a size (longformer's `_chunk`)
    return x.view(x.size(0), torch.div(x.size(1), 4, rounding_mode="trunc"), 4) * 2


def vec(n):
    return lambda: (torch.randn(n),)


def test_without_the_options_data_reads_are_breaks():
    run_both(scale_by_item, vec(3), graphs=2)
    assert breaks(scale_by_item, torch.randn(3)) == [
        "Tensor.item() reads the tensor's data (set capture_scalar_outputs to trace it)"
    ]


def test_a_tensor_where_a_number_is_expected_is_a_break_without_the_option():
    for k in (3, 5):
        run_both(tensor_as_size, lambda k=k: (torch.randn(4), torch.tensor(k)), graphs=2)
    assert breaks(tensor_as_size, torch.randn(4), torch.tensor(3)) == [
        "new_zeros reads a tensor's data (set capture_scalar_outputs to trace it)"
    ]


def test_a_tensor_computed_from_constants_is_a_size_in_one_graph():
    run_both(size_from_constants, lambda: (torch.randn(2, 8),), graphs=1, fullgraph=True)


def test_a_tensor_where_a_number_is_expected_is_a_symbolic_value_with_the_option(capture_data):
    run_both(tensor_as_size, lambda: (torch.randn(4), torch.tensor(3)), graphs=1, fullgraph=True)


def test_item_and_tolist_are_symbolic_values_in_one_graph(capture_data):
    run_both(scale_by_item, vec(3), graphs=1, fullgraph=True)
    run_both(return_item, vec(4), graphs=1, fullgraph=True)
    run_both(tolist, vec(3), graphs=1, fullgraph=True)
    run_both(nested_tolist, lambda: (torch.randn(2, 2),), graphs=1, fullgraph=True)
    run_both(scale_by_item, lambda: (torch.randint(0, 5, (3,)),), graphs=1, fullgraph=True)
    run_both(scale_by_item, lambda: (torch.tensor([True]),), graphs=1, fullgraph=True)


def test_sizes_read_from_data_and_checks_on_them(capture_data):
    counter = run_both(int_item, lambda: (torch.randn(10), torch.tensor([2, 3])), graphs=1, fullgraph=True)
    run_both(
        int_item, lambda: (torch.randn(10), torch.tensor([4, 4])), backend=counter, reset=False
    )  # same entry, new data
    assert counter.frame_count == 1


def test_a_check_on_data_runs_with_the_graph(capture_data):
    counter = run_both(failing_check, lambda: (torch.randn(3), torch.tensor([1])), graphs=1, fullgraph=True)
    with pytest.raises(RuntimeError):
        failing_check(torch.randn(3), torch.tensor([5]))
    run_both(
        failing_check, lambda: (torch.randn(3), torch.tensor([5])), backend=counter, reset=False
    )  # raises as eager
    assert counter.frame_count == 1


def test_a_branch_on_a_data_value_is_a_break_resuming_in_the_branch_taken(capture_data):
    for data in (torch.ones(3), -torch.ones(3)):
        run_both(branch_on_item, lambda data=data: (data.clone(),), graphs=2)  # the graph, then the branch's
    (reason,) = breaks(branch_on_item, torch.randn(3))
    assert reason.startswith("data-dependent control flow: a branch on zuf0 > 0"), reason
    assert "a value read from tensor data" in reason


def test_data_dependent_output_sizes(capture_data):
    counter = run_both(nonzero, vec(8), graphs=1, fullgraph=True)
    run_both(nonzero, vec(8), backend=counter, reset=False)
    run_both(mask_then_size, vec(8), backend=counter, fullgraph=True, reset=False)
