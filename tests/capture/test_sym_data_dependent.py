"""Operations whose result size depends on tensor data break the graph, as torch.compile does by default."""

import pytest
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


def _length_after_a_data_dependent_break(x):
    kept = torch.masked_select(x, x > 0)  # a graph break: the size depends on the data
    return kept.sum() * 2, len(kept), kept.shape[0] + len(kept)


def test_len_of_a_tensor_of_dynamic_size_is_the_int_of_each_call(check):
    # The resumed graph takes `kept` with a dynamic size from the second call on: len() was a SymInt written
    # into the resumed code as a constant, so the caller got the symbol itself (`s38`), not the length.
    values = iter([torch.tensor([1.0, -1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0]), torch.tensor([-1.0, 0.5, 4.0])])
    check(_length_after_a_data_dependent_break, calls=3, make_args=lambda: (next(values),))


def test_a_symbolic_value_is_never_held_as_a_constant():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from dynajit.capture._symbolic.variables.constant import ConstVar

    env = ShapeEnv()
    size = env.create_unbacked_symint()
    for value in (size, (1, size), torch.Size([2, size])):
        with pytest.raises(TypeError, match="symbolic value"):
            ConstVar(value)
