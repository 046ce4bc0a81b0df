"""Operations whose result size depends on tensor data break the graph, as torch.compile does by default."""

import torch

from dynajit.capture._convert import convert_frame
from dynajit.capture._frame import FrameContext
from dynajit.capture.testing import CompileCounter


def d_mask_select(x):
    y = x * 2
    picked = y[y > 0]  # its length is known only once the data is
    return picked.sum() + y.mean(), picked.shape


def d_nonzero_count(x):
    count = torch.nonzero(x > 0.5).shape[0]
    return x + count


def d_unique(x):
    return torch.unique((x * 3).round()).float().sum() * x


def test_boolean_mask_indexing_is_a_break_with_its_reason(check, t):
    check(d_mask_select, t(8), graphs=2)
    converted = convert_frame(d_mask_select, (t(8),), FrameContext(backend=CompileCounter()))
    (brk,) = converted.graph_breaks
    assert "the size of its result depends on the tensor's data (aten.nonzero" in brk.reason
    assert brk.user_stack[-1].lineno == d_mask_select.__code__.co_firstlineno + 2


def test_nonzero_and_unique_are_breaks_and_match_eager(check, t):
    check(d_nonzero_count, t(8), graphs=2)
    check(d_unique, t(8), graphs=2)
