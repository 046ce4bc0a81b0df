"""``torch._check`` and its family: folded when the condition is known, raising eager's error when it fails."""

import warnings

import pytest
import torch
from torch_corners import breaks, run_both

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def checked(x):
    torch._check(x.shape[0] > 1, lambda: f"too small: {x.shape[0]}")
    torch._check_value(x.dim() == 1, "one dimension")
    torch._check_index(x.shape[0] < 100)
    torch._check_type(x.dtype == torch.float32, lambda: "float")
    torch._check_not_implemented(True)
    torch._check_with(ValueError, x.numel() >= 2, lambda: "few")
    return x + 1


def checked_size(x):
    n = x.shape[0]
    torch._check_is_size(n)
    torch._check_is_size(n - 1, max=10)
    return x * 2


def failing(x):
    torch._check(x.shape[0] > 10, lambda: f"needs more than 10 rows, got {x.shape[0]}")
    return x + 1


def failing_with(x):
    torch._check_with(IndexError, x.shape[0] == 7, lambda: "seven")
    return x + 1


def failing_index(x):
    torch._check_index(False, "out of range")
    return x


def tensor_cond(x):
    torch._check(x.sum() > 0)
    return x


def rows(n):
    return lambda: (torch.randn(n),)


def test_true_checks_add_nothing_to_the_graph():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # _check_is_size is deprecated, compiled or not
        for fn in (checked, checked_size):
            counter = run_both(fn, rows(5), graphs=1, fullgraph=True)
            assert counter.op_count == 1, counter.graphs[0].code


@pytest.mark.parametrize("fn", [failing, failing_with, failing_index, tensor_cond])
def test_failing_checks_raise_eager_errors(fn):
    run_both(fn, rows(5))
    (reason,) = breaks(fn, torch.randn(5))
    assert reason.startswith("torch._check"), reason


def test_a_check_on_symbolic_sizes_is_guarded():
    counter = CompileCounter()
    compiled = capture.optimize(counter, dynamic=True)(failing)
    x = torch.randn(12)
    torch.testing.assert_close(compiled(x), failing(x))
    y = torch.randn(15)
    torch.testing.assert_close(compiled(y), failing(y))
    assert counter.frame_count == 1
    with pytest.raises(RuntimeError, match="needs more than 10 rows, got 4"):
        compiled(torch.randn(4))
