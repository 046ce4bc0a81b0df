"""The default backend against eager: what eager raises, the compiled function raises.

The dtype and value checks of ops (used or dead code) and of in-place ops, integer division by zero, indices
out of bounds or into an empty dim, and ``out=`` into an operand of another shape.

Most cases run the function eagerly and compiled through ``inductor_differential.differential``, which
compares results, inputs after the call and exceptions; a frame that fell back to eager fails.
"""

from __future__ import annotations

import pytest
import torch
from inductor_differential import differential

from dynajit import capture, compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


# ------------------------------------------------------------------ dtype and value checks


@pytest.mark.parametrize(
    ("fn", "x"),
    [
        (lambda x: x - 1, torch.tensor([True, False, True])),
        (lambda x: torch.rsub(x, 1), torch.tensor([True, False])),
        (lambda x: (x * 2).argmax(), torch.tensor([True, False])),
        (lambda x: x.float().bitwise_and(x.float()), torch.tensor([1, 2])),
        (lambda x: (x + 0.5) << 1, torch.tensor([1.0, 2.0])),
        (lambda x: -x, torch.tensor([True, False])),
        (lambda x: x.softmax(-1), torch.tensor([1, 2])),
        (lambda x: (x * 2).log_softmax(0), torch.tensor([True, False])),
        (lambda x: x.min(), torch.zeros(0, 3)),
        (lambda x: (x + 1).amax(), torch.zeros(2, 0)),
        (lambda x: (x * 2).frac(), torch.tensor([1, 2])),
        (lambda x: torch.mvlgamma(x, 3) + 1, torch.tensor([2.0, 3.0])),
    ],
    ids=[
        "bool_sub_scalar", "bool_rsub", "argmax_bool", "bitwise_and_float", "lshift_float", "neg_bool",
        "softmax_int", "log_softmax_bool_times_int", "min_of_empty", "amax_of_empty", "frac_int",
        "mvlgamma_valid_values",
    ],
)  # fmt: skip
def test_a_dtype_check_eager_makes_raises_the_same_error(fn, x):
    """What eager raises the compiled function raises at every call; what eager computes it computes."""
    compiled = differential(fn, x)
    differential(fn, x, compiled=compiled)  # every call raises, not only the first


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(0, 1, 0, 0), (0, 3), (2, 3)], ids=["empty_4d", "empty_rows", "filled"])
@pytest.mark.parametrize(
    "fn",
    [lambda x: x.bool().softmax(1), lambda x: x.long().log_softmax(-1), lambda x: (x > 0).softmax(0) * 2],
    ids=["softmax_bool", "log_softmax_long", "softmax_bool_used"],
)
def test_a_softmax_eager_computes_only_when_empty(backend, shape, fn):
    """Eager's softmax kernel refuses bools and ints, but an empty input never reaches it: the result is an empty
    tensor of the input's dtype. The decomposition refuses the dtype anyway (a subtraction of bools), so the op is
    compiled whole; a filled input raises eager's error."""
    differential(fn, torch.randn(shape), compiled=compiler.compile(fn, backend=backend))


def _unused(op):
    def fn(x):
        op(x)  # eager raises here; the result is dead code the compiled graph would drop
        return x + 1

    return fn


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    ("op", "x"),
    [
        (torch.argmin, torch.tensor([True, False])),
        (lambda x: x.argmax(), torch.tensor([True, False])),
        (torch.floor, torch.tensor([True, False])),
        (lambda x: x.frac(), torch.tensor([1, 2])),
        (lambda x: x.var(), torch.tensor([1, 2])),
        (lambda x: x // 0, torch.tensor([1, 2])),
        (lambda x: x.remainder(0), torch.tensor([1, 2])),
        (lambda x: torch.nn.functional.linear(x, x.new_ones(2, 2)), torch.tensor([[True, False]])),
        (lambda x: x @ x.t(), torch.tensor([[True, False]])),
        (lambda x: torch.complex(x, x.double()), torch.tensor([1.0, 2.0])),
        (lambda x: torch.polar(x, x.double()), torch.tensor([1.0, 2.0])),
        (lambda x: torch.complex(x, x, out=torch.empty(2, dtype=torch.complex64)), torch.tensor([1.0, 2.0]).double()),
        (lambda x: torch.kthvalue(x, 2, out=(x, torch.empty((), dtype=torch.long))), torch.tensor([3.0, 1.0, 2.0])),
        (lambda x: x.median(0, keepdim=True).values, torch.tensor([[True, False], [False, False]])),
        (torch.median, torch.tensor([True, False, True])),
        (lambda x: x.nanmedian(0), torch.tensor([True, False])),
        (lambda x: x.kthvalue(1, 0), torch.tensor([True, False])),
        (lambda x: x.topk(2), torch.tensor([True, False, True])),
        (lambda x: x.logcumsumexp(0), torch.tensor([1, 2])),
        (lambda x: x.trace(), torch.tensor([[True, False], [False, True]])),
    ],
    ids=[
        "argmin_bool",
        "argmax_bool",
        "floor_bool",
        "frac_int",
        "var_int",
        "floordiv_zero",
        "remainder_zero",
        "linear_bool",
        "matmul_bool",
        "complex_of_float_and_double",
        "polar_of_float_and_double",
        "complex_into_an_out_of_another_dtype",
        "kthvalue_into_its_own_input",  # out=(values, indices): values overlap the input eager reads
        "median_dim_bool",  # (fuzz zz9:236) the meta kernels of these accept bools, their CPU kernels do not
        "median_bool",
        "nanmedian_bool",
        "kthvalue_bool",
        "topk_bool",
        "logcumsumexp_int",
        "trace_bool",
    ],
)
def test_an_unused_op_eager_refuses_raises_the_same_error(backend, op, x):
    """Fake tensors skip the dtype dispatch and value checks of eager's kernels: an op whose result is
    unused must still raise what eager raises, whatever the backend drops as dead code."""
    fn = _unused(op)
    differential(fn, x, compiled=compiler.compile(fn, backend=backend))


def _imul(x):
    x *= 2
    return x


@pytest.mark.parametrize(
    ("fn", "x"),
    [
        (lambda x: x.t().mul_(2), torch.tensor([[True, False]])),
        (_imul, torch.tensor([True, False])),
        (lambda x: torch.Tensor.div_(x[1:], 2), torch.tensor([4, 6, 8])),
        (lambda x: x.clamp_(0.5, 1.5), torch.tensor([1, 2])),
    ],
    ids=["bool_mul_", "bool_imul", "int_div_", "int_clamp_float"],
)
def test_an_in_place_op_eager_refuses_raises_the_same_error(fn, x):
    differential(fn, x)


def _squeezed_then_multiplied(x):
    x.squeeze_()
    y = x.square()
    y.mul_(x)
    return y


def _squeezed_bool_mul_(x):
    x.squeeze_()
    return x.mul_(2)


@pytest.mark.parametrize(
    ("fn", "x"),
    [(_squeezed_then_multiplied, torch.randn(2, 1, 2)), (_squeezed_bool_mul_, torch.tensor([[True], [False]]))],
    ids=["allowed", "refused"],
)
def test_the_check_of_an_in_place_op_after_an_in_place_squeeze(fn, x):
    """The check of which dtypes an in-place op may write runs on tensors of no dim: an input's recorded rank
    is the one it had before ``squeeze_``, which would make a valid ``mul_`` look like a broadcast error."""
    differential(fn, x)


@pytest.mark.parametrize("divisor", [torch.tensor([2, 0, 3]), torch.tensor([2, -1, 3])], ids=["with_zero", "nonzero"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a // b,
        lambda a, b: (a % b) + 1,
        lambda a, b: a.fmod(b),
        lambda a, b: torch.div(a * 2, b, rounding_mode="trunc"),
    ],
    ids=["floordiv", "remainder", "fmod", "trunc_div"],
)
def test_integer_division_by_a_tensor_raises_for_a_zero_divisor(fn, divisor):
    """Eager raises ZeroDivisionError for an integer division by a zero element; a kernel would trap the process."""
    compiled = differential(fn, torch.tensor([7, -7, 5]), divisor)
    differential(fn, torch.tensor([7, -7, 5]), divisor, compiled=compiled)


def _scaled_diagonal_of_bools(x0, n):
    x0.diagonal().mul_(n)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_an_in_place_product_of_bools_and_a_symbolic_int_raises_as_in_eager(backend):
    # (the fuzzer's program d34-1:243) once `n` changed it was symbolic, and the dtype check of the in-place
    # product (int into bool: eager refuses it for every n) was skipped for a symbolic scalar
    compiled = compiler.compile(_scaled_diagonal_of_bools, backend=backend)
    for n in (3, 2, 5):
        for fn in (_scaled_diagonal_of_bools, compiled):
            with pytest.raises(RuntimeError, match="can't be cast to the desired output type Bool"):
                fn(torch.zeros(2, 2, dtype=torch.bool), n)


# ------------------------------------------------------------------ indices eager refuses


def _setitem_with_too_many_indices(x):
    y = x.mean(1)
    y[:, 1:] = 1  # eager: IndexError, too many indices for a tensor of dimension 1
    return y


def test_an_assignment_through_an_index_eager_refuses_raises_the_same_error():
    differential(_setitem_with_too_many_indices, torch.randn(2, 3))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(0, 0), (3, 1), (3, 5)])
def test_an_unused_index_by_a_constant_list_out_of_bounds_raises(backend, shape):
    def fn(x):
        x[[0, 1], [0, -2]]  # dead code in the graph; eager checks the indices
        return x + 1

    differential(fn, torch.randn(shape), compiled=compiler.compile(fn, backend=backend))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(0, 2), (3, 2)])
def test_an_unused_index_tensor_into_an_empty_dim_raises(backend, shape):
    def fn(x):
        x[torch.tensor([0, -1, 0])]  # no value is in bounds of an empty dim
        return x + 1

    differential(fn, torch.randn(shape), compiled=compiler.compile(fn, backend=backend))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(("shape", "dim"), [((1,), -2), ((3,), -2), ((2, 3), -3)])
@pytest.mark.parametrize("used", [True, False])
def test_a_select_at_a_negative_dim_out_of_range_raises(backend, shape, dim, used):
    # (found by the fuzzer, --seed a103-0 --start 185) the fake kernel of select wraps a negative dim without
    # checking its range: the graph computed a 0-d result, or dropped the unused op, where eager raises
    def fn(x):
        picked = x.select(dim, 0)
        return picked * 2 if used else x + 1

    differential(fn, torch.randn(shape), compiled=compiler.compile(fn, backend=backend))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("index", [7, -6, 5, 4, -5], ids=lambda i: f"index{i}")
@pytest.mark.parametrize("used", [True, False])
def test_a_select_scatter_at_an_index_out_of_range_raises(backend, index, used):
    # torch's decomposition, and the lowering after it, wrapped the index without checking its range: the
    # graph returned a tensor, or dropped the unused op, where eager raises IndexError
    def fn(x, src):
        scattered = torch.select_scatter(x, src, 0, index)
        return scattered * 2 if used else x + 1

    differential(fn, torch.randn(5, 4), torch.randn(4), compiled=compiler.compile(fn, backend=backend))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("used", [True, False])
def test_a_select_scatter_at_an_index_a_symbolic_size_leaves_out_of_range_raises(backend, used):
    # the range check skipped a symbolic size: the graph compiled for 5 rows then 4, dynamic in the rows,
    # dropped the unused op on 2 rows, where eager raises IndexError
    def fn(x, src):
        scattered = torch.select_scatter(x, src, 0, 3)
        return scattered * 2 if used else x + 1

    compiled = compiler.compile(fn, backend=backend, dynamic=None)
    for rows in (5, 4, 2, 6):
        differential(fn, torch.randn(rows, 4), torch.randn(4), compiled=compiled)


_EMPTY_SOURCE_INDEXING = {
    "index_select": lambda x: x.index_select(0, torch.tensor([0, 0])),
    "index_select_1d": lambda x: x.flatten().index_select(0, torch.tensor([0])),
    "gather": lambda x: torch.gather(x, 0, torch.zeros(2, x.shape[1], dtype=torch.long)),
    "take": lambda x: torch.take(x, torch.tensor([0])),
    "embedding": lambda x: torch.nn.functional.embedding(torch.tensor([0]), x),
    "index_add_": lambda x: x.clone().index_add_(0, torch.tensor([0]), torch.ones(1, x.shape[1])),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(0, 2), (3, 2)])
@pytest.mark.parametrize("op", list(_EMPTY_SOURCE_INDEXING))
def test_an_unused_indexing_op_of_an_empty_source_raises_what_eager_raises(backend, shape, op):
    """Eager refuses a non-empty index into an empty dim whatever the values (RuntimeError, or IndexError for
    a 1-D source); the meta kernels do not check, and the graph drops the unused op."""
    read = _EMPTY_SOURCE_INDEXING[op]

    def fn(x):
        read(x)  # dead code in the graph
        return x + 1

    differential(fn, torch.randn(shape), compiled=compiler.compile(fn, backend=backend))


_SCALAR_OPERAND_OPS = {
    "index_select": lambda s: s.index_select(0, torch.tensor([0, 0])),
    "index_select_one": lambda s: s.index_select(0, torch.tensor([0])),
    "gather": lambda s: torch.gather(s, 0, torch.zeros(2, dtype=torch.long)),
    "index_add_": lambda s: s.clone().index_add_(0, torch.tensor([0, 0]), torch.ones(2)),
    "index_put_": lambda s: s.clone().index_put_((torch.tensor([0, 0]),), torch.tensor(1.0)),
    "sort_dim1": lambda s: s.sort(1),
    "sort_dim0": lambda s: s.sort(0),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 3)])
@pytest.mark.parametrize("op", list(_SCALAR_OPERAND_OPS))
def test_an_unused_op_of_a_0d_operand_raises_what_eager_raises(backend, shape, op):
    """Eager reads a 0-d source at one position only ("Index to scalar can have only 1 value, got 2") and gives
    it the dims -1 and 0 only (``sort(1)``: IndexError), and only when the squeezed tensor is 0-d; the meta
    kernels do not check, and the graph drops the unused op."""
    read = _SCALAR_OPERAND_OPS[op]

    def fn(x):
        read(x.squeeze())  # dead code in the graph; 0-d for shape (1, 1)
        return x + 1

    differential(fn, torch.randn(shape), compiled=compiler.compile(fn, backend=backend))


_EMPTY_DIM_REDUCTIONS = {
    "median": lambda v: v.median(2, keepdim=True),
    "median_of_dim_1": lambda v: torch.median(v, dim=1),
    "nanmedian": lambda v: v.nanmedian(2),
    "mode": lambda v: v.mode(2),
    "max_with_dim": lambda v: v.max(2),
    "kthvalue": lambda v: v.kthvalue(1, 2),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(3, 0, 0), (3, 4, 0), (3, 4, 5)])
@pytest.mark.parametrize("op", list(_EMPTY_DIM_REDUCTIONS))
def test_an_unused_reduction_over_an_empty_dim_raises_what_eager_raises(backend, shape, op):
    """Eager's median, nanmedian and mode refuse to reduce an empty dim ("Expected reduction dim 2 to have
    non-zero size"); their meta kernels do not check, and the graph drops the unused op."""
    reduce = _EMPTY_DIM_REDUCTIONS[op]

    def fn(x):
        reduce(x)  # dead code in the graph
        return x + 1

    differential(fn, torch.randn(shape), compiled=compiler.compile(fn, backend=backend))


_SLICED_REDUCTIONS = {**_EMPTY_DIM_REDUCTIONS, "amax": lambda v: v.amax(2), "argmin": lambda v: v.argmin(2)}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("widths", [(3, 2, 4, 2, 5), (2, 3, 2)], ids=["empty_second", "empty_first"])
@pytest.mark.parametrize("op", list(_SLICED_REDUCTIONS))
def test_an_unused_reduction_over_a_slice_a_symbolic_size_empties_raises(backend, dynamic, widths, op):
    """(fuzz a240:1921) With symbolic sizes, ``x[..., 1:-1]`` of a width-2 ``x`` is empty, yet the checks saw
    its size only at the width traced: the graph dropped the unused reduction, whichever width came first."""
    reduce = _SLICED_REDUCTIONS[op]

    def fn(x):
        reduce(x[..., 1:-1])  # dead code in the graph
        return x * 2

    compiled = compiler.compile(fn, backend=backend, dynamic=dynamic)
    for width in widths:
        differential(fn, torch.randn(2, 3, width), compiled=compiled)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("op", ["median", "nanmedian", "mode"])
def test_an_unused_reduction_over_an_empty_dim_of_a_tensor_of_symbolic_size_raises_what_eager_raises(backend, op):
    """The empty slice of a tensor of symbolic size is checked at the size traced: the empty dim is static, so
    eager's refusal holds for every size the guards admit."""

    def fn(x):
        getattr(x[:, :0], op)(1)  # dead code in the graph
        return x + 1

    compiled = compiler.compile(fn, backend=backend)
    for rows in (3, 5):
        x = torch.randn(rows, 4)
        capture.mark_dynamic(x, 0)
        differential(fn, x, compiled=compiled)


_RANK_CHECKS = {
    "sort_dim1": lambda v: v.sort(1),
    "argsort_dim1": lambda v: v.argsort(1),
    "msort_of_a_vector": lambda v: v.msort(),
    "bucketize_2d_boundaries": lambda v: torch.bucketize(v, v.unsqueeze(0)),
    "sort_dim0": lambda v: v.sort(0),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("op", list(_RANK_CHECKS))
def test_an_unused_op_checking_its_operands_ranks_raises_what_eager_raises(backend, op):
    """Eager's sort wraps its dim against the operand's rank (IndexError for dim 1 of a vector) and bucketize
    takes 1-D boundaries only; their meta kernels check neither, and the graph drops the unused op."""
    run = _RANK_CHECKS[op]

    def fn(x):
        run(x * 2)  # dead code in the graph
        return x + 1

    differential(fn, torch.randn(3), compiled=compiler.compile(fn, backend=backend))


_FILLS = {
    "masked_fill": lambda a, v: a.masked_fill(a > 0, v),
    "masked_fill_": lambda a, v: a.clone().masked_fill_(a > 0, v),
    "index_fill_": lambda a, v: a.clone().index_fill_(0, torch.tensor([1]), v),
    "fill_": lambda a, v: a.clone().fill_(v),  # eager wraps here: no check
}
_FILL_VALUES = {
    "uint8 from 300.0": (torch.uint8, torch.tensor(300.0)),
    "uint8 from -2.0": (torch.uint8, torch.tensor(-2.0)),
    "uint8 from -1": (torch.uint8, torch.tensor(-1)),  # a negative integer wraps, as eager allows
    "uint8 from 7": (torch.uint8, torch.tensor(7)),
    "float16 from 1e10 (float64)": (torch.float16, torch.tensor(1e10, dtype=torch.float64)),
    "int32 from 2**40": (torch.int32, torch.tensor(2**40)),
    "float32 from -inf": (torch.float32, torch.tensor(float("-inf"))),
}


@pytest.mark.parametrize("value", list(_FILL_VALUES))
@pytest.mark.parametrize("op", list(_FILLS))
def test_a_fill_value_a_one_element_tensor_holds_must_fit_as_in_eager(op, value):
    """Eager reads the value of a one-element tensor as a scalar of the filled tensor's dtype and raises when it
    does not fit ("value cannot be converted to type uint8_t without overflow"); the decompositions cast it, and
    the kernels wrote 44 for 300."""
    dtype, fill = _FILL_VALUES[value]
    differential(_FILLS[op], torch.tensor([0, 5, 9, 2], dtype=dtype), fill)


# ------------------------------------------------------------------ out= into an operand of another shape


def _added_into_its_own_smaller_operand(x):
    v = x.sum(dim=(0, -1), keepdim=True)
    torch.add(v, x, out=v)
    return None


def test_an_out_write_into_an_operand_of_another_shape_raises_as_in_eager():
    # Eager treats out= into one of the operands as in-place and refuses to resize it; the fake kernel resized it
    # (with a warning), and the compiled program returned where eager raises.
    differential(_added_into_its_own_smaller_operand, torch.randn(1, 2))


def _added_into_its_own_row(x0, x1):
    v = x1.unbind(0)[0]
    torch.add(v, x0, out=v)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_out_write_into_an_operand_of_another_shape_raises_as_in_eager_with_symbolic_sizes(backend):
    # With the sizes symbolic, the check that the out= operand is not resized was skipped: the fake kernel resized
    # it and the backend failed to compile the graph (strict mode raised), where eager raises its own error.
    compiled = compiler.compile(_added_into_its_own_row, backend=backend, dynamic=True)
    for n in (0, 2, 3):
        errors = []
        for fn in (_added_into_its_own_row, compiled):
            with pytest.raises(RuntimeError) as info:
                fn(torch.randn(1, n, n), torch.randn(1, 1))
            errors.append(str(info.value))
        assert errors[0] == errors[1] and "doesn't match the broadcast shape" in errors[0]


_INDEX_PAST_THE_END = {
    "cross_entropy": lambda x, i: torch.nn.functional.cross_entropy(x * 1, i),
    "nll_loss_2d": lambda x, i: torch.nn.functional.nll_loss(x.reshape(1, 5, 4, 1).log_softmax(1), i.reshape(1, 4, 1)),
    "index_add": lambda x, i: x.clone().index_add(0, i, x[:4] * 2),
    "max_unpool": lambda x, i: torch.nn.functional.max_unpool1d(x[None, :, :4], i.reshape(1, 1, 4).expand(1, 4, 4), 2),
}


@pytest.mark.parametrize("op", list(_INDEX_PAST_THE_END))
@pytest.mark.parametrize("past", [False, True], ids=["in_bounds", "past_the_end"])
def test_an_index_past_the_end_raises_eagers_error(op, past):
    """Eager's kernels name the index they refuse in their own error (IndexError "Target 9 is out of bounds." for
    a class past the last); the decompositions' bounds checks raised the other type, with another message."""
    index = torch.tensor([0, 3, 2, 9 if past else 1])
    differential(_INDEX_PAST_THE_END[op], torch.randn(4, 5), index)


@pytest.mark.parametrize("index", [[0, 3, 2, 1], [0, -1, 2, 1], [0, 3, 2, 9]], ids=["in_bounds", "negative", "past"])
def test_an_index_copy_refuses_a_negative_index_as_in_eager(index):
    """Eager's ``index_copy`` refuses a negative index, where ``index_select`` and ``index_put`` count it from the
    end; its decomposition, an ``index_put``, wrote the last row."""
    differential(lambda x, i: x.clone().index_copy(0, i, x[:4] * 2), torch.randn(4, 5), torch.tensor(index))


@pytest.mark.parametrize("value", [0.25, float("nan"), 1.5], ids=["in_range", "nan", "above_one"])
def test_a_binary_cross_entropy_of_a_value_outside_0_1_raises_as_in_eager(value):
    """Eager's kernel checks every input of ``binary_cross_entropy`` lies in [0, 1]; its decomposition did not."""
    x = torch.tensor([0.1, 0.9, value, 0.5])
    differential(lambda p, t: torch.nn.functional.binary_cross_entropy(p * 1, t), x, torch.full((4,), 0.3))


def _into_a_temporary(x, i):
    y = x.clone()
    y[i] = 3.0
    return x + 1


_UNUSED_VALUE_CHECKS = {
    "getitem": lambda x, i: (x[i], x + 1)[1],
    "index_select": lambda x, i: (x.index_select(0, i), x + 1)[1],
    "gather": lambda x, i: (x.gather(0, i.reshape(-1, 1).expand(-1, 4)), x + 1)[1],
    "embedding": lambda x, i: (torch.nn.functional.embedding(i, x), x + 1)[1],
    "setitem_temporary": _into_a_temporary,
    "index_put_temporary": lambda x, i: (x.clone().index_put_((i,), torch.tensor(1.0)), x * 2)[1],
    "integer_floor_division": lambda x, i: (i // (i - 5), x * 2)[1],
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("case", list(_UNUSED_VALUE_CHECKS))
@pytest.mark.parametrize("index", [[0, 3], [0, 5]], ids=["in_range", "out_of_range"])
def test_an_unused_op_checking_its_integer_operands_raises_as_in_eager(backend, case, index):
    """An op whose result is never read, over an index tensor (or an integer divisor) whose values eager's kernel
    checks, raises what eager raises: the graph returns its result too, so no backend drops it as dead code."""
    fn = _UNUSED_VALUE_CHECKS[case]
    differential(fn, torch.randn(5, 4), torch.tensor(index), compiled=compiler.compile(fn, backend=backend))


def _unused_gather_of_a_sqrt(x):
    checked = torch.gather(torch.nan_to_num(x.sqrt()), 0, torch.zeros_like(x, dtype=torch.long))  # noqa: F841
    return x @ x.mT


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_unused_result_kept_for_its_checks_takes_no_part_in_the_backward(backend):
    """The graph returns an unused gather for its index checks; returned as it was, it got a zero gradient in the
    backward, and zero times ``sqrt``'s NaN derivative at -1 made the input's gradient NaN (fuzz a43-1:481)."""
    x = torch.tensor([[-1.0, 0.5]], requires_grad=True)
    twin = x.detach().clone().requires_grad_()
    _unused_gather_of_a_sqrt(x).sum().backward()
    compiler.compile(_unused_gather_of_a_sqrt, backend=backend)(twin).sum().backward()
    torch.testing.assert_close(twin.grad, x.grad)


def _one_hot_rows(w, i):
    return torch.nn.functional.one_hot(i, 10).float() @ w


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("classes", [[1, 9], [1, -1], [1, 10]], ids=["in_range", "negative", "past_the_last"])
def test_a_check_returning_nothing_is_called_and_raises_as_in_eager(backend, classes):
    """``one_hot`` checks its classes with ``_assert_async``, an op with no value: the default backend's aten
    call of it read a value that op does not have, and the frame failed to compile. The traced check's message
    is the decomposition's (``one_hot: `` before eager's), as under torch.compile."""
    w, i = torch.randn(10, 4), torch.tensor([classes])
    compiled = compiler.compile(_one_hot_rows, backend=backend)
    with compiler.config.patch(strict=True):
        if classes == [1, 9]:
            torch.testing.assert_close(compiled(w, i), _one_hot_rows(w, i))
            return
        with pytest.raises(RuntimeError) as eager:
            _one_hot_rows(w, i)
        with pytest.raises(RuntimeError) as raised:
            compiled(w, i)
    assert str(eager.value) in str(raised.value)


# ------------------------------------------------------------------ views eager's kernel refuses


_VIEWS_ACROSS_A_SIZE_ONE_DIM = {
    "unused": lambda x: (x.chunk(2, -2)[-1].view(1, -1), None)[1],
    "used": lambda x: x.chunk(2, -2)[-1].view(1, -1) * 1,
    "view_as": lambda x: x.chunk(2, -2)[-1].view_as(torch.empty(1, 4)) * 1,
    "viewable": lambda x: x.chunk(2, -1)[-1].view(2, -1) * 1,
}


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("case", list(_VIEWS_ACROSS_A_SIZE_ONE_DIM))
def test_a_view_across_a_size_one_dim_raises_as_in_eager(case, backend, dynamic):
    """A chunk of a ``(1, 2, 2, 2)`` tensor, sizes ``(1, 2, 1, 2)`` and strides ``(8, 4, 2, 1)``, does not view as
    ``(1, 4)``: eager raises. Fake tensors' reference ``view`` let the size-1 dim join its neighbours, and the
    compiled function returned a view (or, unused, nothing). With ``dynamic``, a later call of sizes that do view
    compiles again and returns eager's values."""
    fn = _VIEWS_ACROSS_A_SIZE_ONE_DIM[case]
    compiled = compiler.compile(fn, backend=backend, dynamic=dynamic)
    for shape in ((1, 2, 2, 2), (1, 3, 2, 2), (1, 2, 2, 4), (1, 1, 2, 2)):
        differential(fn, torch.arange(float(torch.Size(shape).numel())).reshape(shape), compiled=compiled)
