"""The default backend against eager on inputs with odd layouts, aliasing, eager-only checks and dynamic sizes.

Each case runs the same function eagerly and through ``dynajit.compiler.compile`` (backend ``inductor``) on
twins of the same inputs (same values, storage offset and strides) and compares values, dtypes, shapes,
strides, the inputs after the call and the exception raised; a frame that fell back to eager fails.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from twins import twin

import dynajit.capture as capture
from dynajit import compiler


@pytest.fixture(autouse=True)
def _fresh():
    """Cases share code objects (one lambda per parametrisation): each starts with no compiled code."""
    compiler.reset()
    yield
    compiler.reset()


def _call(fn: Callable[..., Any], args: list[Any]) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args), None
    except Exception as err:
        return None, err


def assert_same(expected: Any, actual: Any, strides: bool = True) -> None:
    """Values, dtypes, shapes and (where eager defines them) strides of two results match."""
    flat_e, spec_e = pytree.tree_flatten(expected)
    flat_a, spec_a = pytree.tree_flatten(actual)
    assert spec_e == spec_a
    for e, a in zip(flat_e, flat_a):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor)
            assert (a.shape, a.dtype) == (e.shape, e.dtype)
            if strides:
                # A size-1 dim's stride addresses nothing, and torch's own fake tensors (which give the
                # compiled graph its output layouts) and eager's TensorIterator pick them differently.
                kept = [d for d in range(e.dim()) if e.size(d) > 1]
                assert [a.stride(d) for d in kept] == [e.stride(d) for d in kept], (a.stride(), e.stride())
            torch.testing.assert_close(a, e, equal_nan=True, atol=1e-5, rtol=1e-5)
        else:
            assert a == e


def differential(
    fn: Callable[..., Any], *inputs: Any, compiled: Callable[..., Any] | None = None, strides: bool = True
) -> Any:
    """Run ``fn`` eagerly and compiled on twins of ``inputs``; compare results, inputs after, exceptions."""
    compiled = compiler.compile(fn) if compiled is None else compiled
    eager_args = [twin(x) for x in inputs]
    compiled_args = [twin(x) for x in inputs]
    expected, eager_err = _call(fn, eager_args)
    with capture.observe() as seen, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual, compiled_err = _call(compiled, compiled_args)
    assert [f.kind for f in seen.frames if f.kind in ("eager", "error")] == []
    assert not [w for w in caught if "eager" in str(w.message)], [str(w.message) for w in caught]
    if eager_err is not None or compiled_err is not None:
        assert type(compiled_err) is type(eager_err), (compiled_err, eager_err)
        assert str(compiled_err) == str(eager_err)
        return compiled
    assert_same(expected, actual, strides)
    for e, a in zip(eager_args, compiled_args):  # mutated inputs
        assert_same(e, a, strides)
    return compiled


# ------------------------------------------------------------------ extern calls on views with an offset


@pytest.mark.parametrize(
    "fn",
    [
        lambda v: torch.mm(v.mT, v),
        lambda v: torch.mm(v, v.mT) + 1,
        lambda v: torch.addmm(v[0], v.mT, v),
        lambda v: torch.bmm(v.unsqueeze(0), v.mT.unsqueeze(0)),
        lambda v: torch.cat([v, v[2:]]),
    ],
    ids=["mm_transposed", "mm_then_add", "addmm", "bmm", "cat"],
)
def test_an_aten_call_reads_a_view_with_a_storage_offset(fn):
    differential(fn, torch.randn(7, 4)[1:])


def test_an_aten_call_reads_a_strided_view_of_an_offset_input():
    differential(lambda v: torch.mm(v[:, 1:3].t(), v[:, ::2]), torch.randn(9, 6)[2:, 1:])


# ------------------------------------------------------------------ outputs never alias what eager keeps apart


def _sum_dim0(b):
    return b.sum(0, keepdim=True)


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
@pytest.mark.parametrize("reduce", [torch.sum, torch.amax, torch.mean, _sum_dim0], ids=["sum", "amax", "mean", "dim"])
def test_a_one_element_reduction_is_not_an_alias_of_a_mutated_input(shape, reduce):
    if reduce is _sum_dim0 and not shape:
        pytest.skip("no dim 0 to reduce")

    def fn(b):
        v = reduce(b)
        b.add_(3)
        return v

    differential(fn, torch.ones(shape))


def test_a_copy_of_an_input_is_not_an_alias_of_it():
    def fn(x):
        y = x.clone()
        x.mul_(2)
        return y, x.reshape(-1)[:2].contiguous()

    differential(fn, torch.randn(3, 4))


def test_outputs_eager_computes_apart_are_separate_tensors():
    def fn(x):
        a = x + 1
        return a, a.clone(), a.view(-1)

    compiled = compiler.compile(fn)
    a, b, c = compiled(torch.randn(2, 3))
    b.zero_()
    assert not torch.equal(a, b)
    c.fill_(7)  # a view in eager: writes through to a
    assert torch.equal(a, torch.full((2, 3), 7.0))


def _storages(out: Any) -> list[int]:
    """Which outputs share memory: each tensor leaf's index among the distinct storages, in order of appearance."""
    seen: list[int] = []
    for t in pytree.tree_leaves(out):
        ptr = t.untyped_storage().data_ptr()
        seen.append(ptr) if ptr not in seen else None
    return [seen.index(t.untyped_storage().data_ptr()) for t in pytree.tree_leaves(out)]


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 4, 5)])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (x.pow(2), x.pow(2).contiguous()),
        lambda x: {"a": (y := x.pow(2)), "b": y.contiguous()},
        lambda x: [(y := x.max(dim=1)[1]), y.split(2, 1)[0]],
        lambda x: ((y := x * 2), y, y.view(-1), y[0]),
        lambda x: ((y := x.sum(-1)), y.t()),
        lambda x: ((y := x + 1)[0], y[-1], x - 1),
        lambda x: ((y := x.argmax(-1)), y.unsqueeze(0), y[..., :1]),
        lambda x: ((y := x * 2).sum(1, keepdim=True), y, y.broadcast_to(y.shape)),
    ],
    ids=[
        "contiguous_twice",
        "contiguous_dict",
        "split_of_max",
        "same_and_views",
        "transposed",
        "two_views",
        "argmax",
        "sum_over_size_one",
    ],
)
def test_outputs_eager_returns_in_one_storage_share_it(shape, fn):
    """Outputs that are views of each other, or the same tensor, alias as eager's do: a write through one is seen
    through the others."""
    compiled = differential(fn, torch.randn(shape))
    x = torch.randn(shape)
    expected, actual = fn(x.clone()), compiled(x.clone())
    assert _storages(actual) == _storages(expected)
    leaves_e, leaves_a = pytree.tree_leaves(expected), pytree.tree_leaves(actual)
    assert [a is leaves_a[0] for a in leaves_a] == [e is leaves_e[0] for e in leaves_e]
    leaves_e[0].fill_(7)
    leaves_a[0].fill_(7)
    for e, a in zip(leaves_e, leaves_a):
        assert torch.equal(a, e)


def test_an_output_computed_from_a_python_number_is_its_own_storage():
    """``n - x`` starts at a number (a SymInt once ``n`` is dynamic), whose storage is none: the output is new.
    The mask's data-dependent size ends the graph there, so ``v`` and its view are both graph outputs."""

    def fn(x, n):
        v = n - x
        w = v.movedim(-1, 0)
        w[w > 0]
        return v

    compiled = compiler.compile(fn, backend="inductor")
    for n in (1, 5, 7):  # the second call makes n dynamic
        x = torch.randn(1, 3, 3)
        torch.testing.assert_close(compiled(x, n), fn(x, n))


# ------------------------------------------------------------------ eager's strides for new outputs


LAYOUTS = {
    "contiguous": lambda: torch.randn(4, 6),
    "transposed": lambda: torch.randn(6, 4).t(),
    "transposed_step": lambda: torch.randn(8, 8).t()[::2, ::2],
    "offset_slice": lambda: torch.randn(6, 8)[1:5, 2:],
    "expanded": lambda: torch.randn(1, 6).expand(4, 6),
    "size_one": lambda: torch.randn(6, 1).t(),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.clone(),
        lambda x: x.contiguous(),
        lambda x: x[::2, ::2].clone(),
        lambda x: torch.clone(x, memory_format=torch.contiguous_format),
        lambda x: x + 1,
        lambda x: x.to(torch.float64),
        lambda x: x.t().clone(),
    ],
    ids=["clone", "contiguous", "step_clone", "clone_contiguous_format", "add", "to_double", "t_clone"],
)
def test_new_outputs_have_eager_strides(layout, fn):
    differential(fn, LAYOUTS[layout]())


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.t().broadcast_to((1, 2, 2)).long() + 3,
        lambda x: x.t().expand(3, 2, 2) * 2,
        lambda x: x.t().unsqueeze(0).expand(2, 2, 2).to(torch.float64),
    ],
    ids=["long_of_broadcast", "mul_of_expand", "double_of_unsqueezed_expand"],
)
def test_a_copy_of_an_expanded_view_has_eager_strides(fn):
    """Eager lays the copy out by the view's strides, new dims' included (0 for a dim ``expand`` adds), which the
    functionalized trace may give otherwise (a size-1 dim's stride): the copy's layout follows eager's."""
    differential(fn, torch.randn(2, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("first", ["transposed", "contiguous"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: a // b,
        lambda a, b: torch.div(a, b, rounding_mode="floor") + 1,
        lambda a, b: torch.div(a, b, rounding_mode="trunc"),
        lambda a, b: torch.copysign(a, b),
        lambda a, b: (a // b) * 2,
        lambda a, b: ((a // b) * 2).t(),
    ],
    ids=["floordiv", "div_floor_add", "div_trunc", "copysign", "floordiv_mul", "floordiv_mul_t"],
)
def test_ops_with_reference_fake_kernels_have_eager_strides(dtype, first, fn):
    """Their fake kernels (Python references) lay the result out as the second operand; eager as TensorIterator."""
    t, c = torch.randn(4, 3).t() * 10, torch.randn(3, 4).abs() * 3 + 1
    a, b = (t, c) if first == "transposed" else (c, t)
    differential(fn, a.to(dtype), b.to(dtype))


# ------------------------------------------------------------------ what eager raises, the compiled graph raises


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


# ------------------------------------------------------------------ in-place ops on views of inputs


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.copy_(x.flip(-1)),
        lambda x: x[1:].add_(1),
        lambda x: x.t().mul_(2),
        lambda x: x[..., 0].zero_(),
        lambda x: (x.add_(1), x * 2),
        lambda x: x.masked_fill_(x > 0, 0).sum(0),
    ],
    ids=["copy_flip", "slice_add_", "t_mul_", "column_zero_", "mutated_and_used", "masked_fill_"],
)
def test_in_place_ops_on_inputs_with_odd_layouts(layout, fn):
    if layout == "expanded":
        pytest.skip("eager refuses in-place writes to an expanded tensor")
    differential(fn, LAYOUTS[layout]())


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


# ------------------------------------------------------------------ writes into tensors whose elements share memory


def _write_expanded(op):
    def fn(x):
        y = x.expand(3, 3)
        op(y)
        return y * 1, x + 0

    return fn


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.mul_(x.narrow(-1, 0, 1)),
        lambda x: x.mul_(x[:, :, 1:]),
        lambda x: x[:, 1:].add_(x[:, :-1]),
        lambda x: x.add_(x[0]),
        lambda x: x.copy_(x.transpose(1, 2)),
        lambda x: x.add_(x.view(x.shape)),
    ],
    ids=["first_column", "last_column", "shifted", "first_row", "transposed", "same_layout"],
)
def test_an_in_place_op_reading_its_target_in_another_layout_does_what_eager_does(backend, fn):
    """Eager reads such an operand's elements before or after their write, in its loop order (or refuses a
    partial overlap); the graph must not read them all first and return a value eager never gives."""
    differential(fn, torch.arange(12.0).view(2, 2, 3) + 1, compiled=compiler.compile(fn, backend=backend))


def _augmented_slices(x):
    y = x.clone()
    y[::2] += 1
    y[:, 0] *= 2
    view = y[::2]
    view += 3
    return y, view


@pytest.mark.parametrize("shape", [(1, 1), (4, 3), (0, 3)])
def test_augmented_assignments_to_slices_are_one_graph_with_eager_view_strides(shape):
    """``y[::2] += 1`` stores back the very view it added into (no overlap to refuse), and the view returned
    with its base has eager's strides even on size-1 dims, which eager's own overlap checks read."""
    compiled = differential(_augmented_slices, torch.randn(shape))
    with capture.observe() as seen:
        compiled(torch.randn(shape))
    assert [brk.reason for frame in seen.frames for brk in frame.graph_breaks] == []


def _view_stored_back_after_a_break(x):
    y = x.clone()
    view = y[::2]
    view += 1
    print(end="")  # a graph break: Python stores back the view the graph returned with its base
    y[::2] = view  # eager's copy_ between two views of one memory: a partial overlap unless strides are equal
    return y, view


def _setitem_with_too_many_indices(x):
    y = x.mean(1)
    y[:, 1:] = 1  # eager: IndexError, too many indices for a tensor of dimension 1
    return y


def test_an_assignment_through_an_index_eager_refuses_raises_the_same_error():
    differential(_setitem_with_too_many_indices, torch.randn(2, 3))


def _assigned_into_its_own_slice(x):
    x[::2] = x


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 3), (1,)])
def test_an_assignment_of_a_tensor_into_its_own_region_raises_as_in_eager(backend, shape):
    # ``x[::2]`` of one row is x's memory in other strides: eager refuses the copy (a partial overlap), where
    # the region was compared with the value only when they were different nodes, and the graph copied.
    differential(
        _assigned_into_its_own_slice,
        torch.randn(shape),
        compiled=compiler.compile(_assigned_into_its_own_slice, backend=backend),
    )


@pytest.mark.parametrize("shape", [(1, 1), (4, 3)])
def test_a_view_returned_with_its_base_has_eager_strides_on_size_one_dims(shape):
    x = torch.randn(shape)
    compiled = compiler.compile(_view_stored_back_after_a_break)
    expected, actual = _view_stored_back_after_a_break(x), compiled(x)
    assert [t.stride() for t in actual] == [t.stride() for t in expected]
    differential(_view_stored_back_after_a_break, x)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    "x",
    [torch.zeros(3, dtype=torch.bool), torch.full((3,), float("nan")), torch.full((3,), 1e20)],
    ids=["bool", "nan", "huge"],
)
def test_a_write_through_an_expand_that_repeats_nothing(backend, x):
    """Functionalization would rebuild ``x`` as ``x + (1 - x)``: refused for bools, NaN for NaN, 0 for 1e20."""

    def fn(x):
        y = (x * 1).unsqueeze(0).expand(1, *x.shape)
        y[-1] = 1
        z = x.unsqueeze(0).expand(2, *x.shape).chunk(2, 0)[-1]  # a piece of a split expand
        z.add_(z)
        return y * 1

    differential(fn, x, compiled=compiler.compile(fn, backend=backend))


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


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    "op",
    [
        lambda y: y.fill_(2),
        lambda y: y.zero_(),
        lambda y: y[:, 0].fill_(2),
        lambda y: y.t().fill_(2),
        lambda y: y.masked_fill_(y > 0, 0),
        lambda y: y[0].add_(1),
        lambda y: y.add_(1),
        lambda y: y.mul_(2),
        lambda y: y.clamp_(0, 1),
        lambda y: y.copy_(torch.ones(3, 3)),
        lambda y: y.copy_(3),
        lambda y: y.copy_(y),
        lambda y: torch.add(y[0], 1, out=y[:, 1]),
    ],
    ids=[
        "fill_", "zero_", "column_fill_", "t_fill_", "masked_fill_", "row_add_", "add_", "mul_", "clamp_",
        "copy_tensor", "copy_number", "copy_itself", "out_column",
    ],
)  # fmt: skip
def test_a_write_into_an_expanded_tensor_does_what_eager_does(backend, op):
    """Eager writes (``fill_``) or refuses ("more than one element of the written-to tensor refers to a single
    memory location"); the compiled function does the same, never a value functionalization made up."""
    fn = _write_expanded(op)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # masked_fill_ on an expanded tensor is deprecated
        differential(fn, torch.arange(3.0) - 1, compiled=compiler.compile(fn, backend=backend))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    ("number", "dtype"), [(3, torch.float32), (3.7, torch.int32), (True, torch.float64), (2.5, torch.float64)]
)
def test_copy_of_a_number_into_a_tensor(backend, number, dtype):
    def fn(x):
        x.copy_(number)
        return x * 2

    differential(fn, torch.zeros(2, 3, dtype=dtype), compiled=compiler.compile(fn, backend=backend))


# ------------------------------------------------------------------ dynamic sizes: every input the guards accept


def test_zero_and_one_sized_dims_after_a_dynamic_recompile():
    compiled = compiler.compile(lambda b: b * 2.0)
    for shape in [(3, 0), (1, 0), (5, 0), (2, 3), (1, 3), (0, 3)]:
        differential(lambda b: b * 2.0, torch.randn(*shape), compiled=compiled)


def test_a_strided_view_kept_across_a_data_dependent_break():
    def fn(v1):
        y = v1[::2]
        if v1.sum() > 0:
            return y * 2 + 1
        return y - 1

    compiled = compiler.compile(fn)
    for n in [5, 2, 7, 1, 3]:
        differential(fn, torch.arange(float(n)) + 1, compiled=compiled)


def test_a_view_op_called_on_a_copy_returns_the_input_view_eager_returns():
    # The last element of an unbind over a flattened dynamic input: its loads are not one strided view, so
    # aten's squeeze runs on a copy, and AOT autograd rebuilds the output from the input with the strides and
    # offset the graph returns: the copy's offset 0 would make it the input's first element.
    def fn(x):
        for t in x.flatten().unbind(0):  # noqa: B007 (the loop leaves its last element in t, as the fuzzer wrote it)
            pass
        return t

    compiled = compiler.compile(fn)
    for shape in [(1, 1), (1, 1), (4, 7), (3, 5)]:
        differential(fn, torch.arange(float(shape[0] * shape[1])).view(shape), compiled=compiled)


def test_an_aten_call_beside_a_constant_compiles():
    # The constant index has no eager storage of its own; asking whether the call's result views a copy compared
    # storages with it and failed to compile.
    def fn(x0, x1):
        v2 = torch.maximum(x0, x0)
        v3 = x1.index_select(0, torch.tensor([0, 0]))
        return [v2.diagonal(), v3]

    compiled = compiler.compile(fn)
    for rows in [0, 0, 3]:
        differential(fn, torch.randn(rows, 1), torch.randn(1, 1), compiled=compiled)


def test_a_dynamic_input_with_another_layout_is_computed_right():
    def fn(x):
        return x.sin() + x.sum(-1, keepdim=True)

    compiled = compiler.compile(fn)
    inputs = [torch.randn(4, 5), torch.randn(6, 5), torch.randn(5, 6).t(), torch.randn(8, 10)[::2, ::2]]
    for x in inputs:
        differential(fn, x, compiled=compiled)


# ------------------------------------------------------------------ many ops at once on odd layouts and dtypes

SWEEP = {
    "neg": lambda x: -x if x.dtype != torch.bool else ~x,
    "abs": torch.abs,
    "exp": torch.exp,
    "sign": torch.sign,
    "square": torch.square,
    "add_scalar": lambda x: x + 2,
    "mul_float": lambda x: x * 1.5,
    "sub_self_t": lambda x: x - x.flip(0),
    "div": lambda x: x / 3,
    "floor_div": lambda x: torch.div(x, 3, rounding_mode="floor"),
    "remainder": lambda x: x % 3,
    "maximum": lambda x: torch.maximum(x, x.flip(-1)),
    "where": lambda x: torch.where(x > 0, x, x * 2),
    "eq": lambda x: x == x.flip(0),
    "clamp": lambda x: x.clamp(-1, 2),
    "sum": lambda x: x.sum(0),
    "sum_all": lambda x: x.sum(),
    "amax": lambda x: x.amax(-1, keepdim=True),
    "argmax": lambda x: x.argmax(0),
    "any": lambda x: x.any(-1),
    "mean": lambda x: x.mean(-1),
    "var": lambda x: x.var(0),
    "cumsum": lambda x: x.cumsum(-1),
    "to_int": lambda x: x.to(torch.int32),
    "to_float": lambda x: x.float() * 2,
    "t_contiguous": lambda x: x.t().contiguous(),
    "reshape": lambda x: x.reshape(-1) * 1,
    "cat": lambda x: torch.cat([x, x[:1]]),
    "expand_add": lambda x: x[:1].expand_as(x) + x,
}

SWEEP_LAYOUTS = {
    "offset": lambda t: t(5, 6)[1:4, 2:],
    "transposed": lambda t: t(4, 3).t(),
    "expanded": lambda t: t(1, 4).expand(3, 4),
    "step": lambda t: t(6, 8)[::2, ::2],
    "size_one": lambda t: t(1, 4),
}


def _tensor(dtype):
    def make(*shape):
        if dtype == torch.bool:
            return torch.rand(shape) > 0.5
        if dtype.is_floating_point:
            return (torch.randn(shape) * 3).to(dtype)
        return torch.randint(-9, 9, shape).to(dtype)

    return make


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32, torch.bool])
@pytest.mark.parametrize("layout", list(SWEEP_LAYOUTS))
def test_op_sweep_matches_eager(layout, dtype):
    torch.manual_seed(0)
    x = SWEEP_LAYOUTS[layout](_tensor(dtype))
    names = []
    for name, op in SWEEP.items():  # the ops eager computes for this dtype (refusals are tested above)
        try:
            op(x)
            names.append(name)
        except Exception:
            continue

    def fn(x):
        return tuple(SWEEP[name](x) for name in names)

    differential(fn, x)


def _spread_of_equal_values(x):
    x[0] += 1
    y = x / x  # every element 1 (the inputs have no zero)
    x.copy_(y.std())  # eager: exactly 0
    return x.bool()


@pytest.mark.parametrize("n", [3, 5, 7, 10, 33])
def test_the_variance_of_equal_values_is_zero_and_means_divide_as_eager(n):
    """A mean divides the sum by the count, as eager does: ``sum * (1 / n)`` rounds otherwise, and with the
    product contracted into ``y - mean`` the standard deviation of three ones came out as 3.6e-8."""
    differential(_spread_of_equal_values, torch.randn(n, 1, generator=torch.Generator().manual_seed(0)))


@pytest.mark.parametrize("rows", [3, 5, 7])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_the_spread_of_equal_rows_and_its_gradient_are_zero_as_in_eager(rows, backend):
    """Three equal rows of arbitrary floats: their rounded sum over 3 misses 3 * row by an ulp, so a two-pass
    standard deviation came out 1.5e-7 where eager's Welford update gives 0 -- and std's gradient is masked to 0
    at 0 but O(1) just above it, so the embedding's gradient differed by 1.2 (found by the fuzzer)."""
    table = torch.randn(10, 8, generator=torch.Generator().manual_seed(0))

    def spread(weight, ids):
        return torch.nn.functional.embedding(ids, weight).std(0, keepdim=True)

    ids = torch.full((rows,), 2)
    results = []
    for fn in (spread, compiler.compile(spread, backend=backend)):
        weight = table.clone().requires_grad_()
        out = fn(weight, ids)
        out.sum().backward()
        results.append((out.detach(), weight.grad))
    assert results[0][0].eq(0).all() and results[1][0].eq(0).all()
    torch.testing.assert_close(results[1][1], results[0][1], rtol=0, atol=0)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_training_batch_norm_of_equal_values_has_eagers_exact_mean_and_gradients(backend):
    """Equal values (a log_softmax of ones): eager's statistics accumulate in double, so their mean is the value
    itself and the normalised output 0; a float sum over 45 missed it by an ulp, which ``rsqrt(var + eps)``
    magnified into a weight gradient of 0.004 where eager's is 0 (found by the fuzzer)."""
    torch.manual_seed(0)
    eager_norm = torch.nn.BatchNorm2d(2)
    compiled_norm = copy.deepcopy(eager_norm)
    x = torch.log_softmax(torch.ones(3, 2, 5, 3), dim=-2)
    grad = torch.randn(3, 2, 5, 3, generator=torch.Generator().manual_seed(1))
    results = []
    for norm, fn in ((eager_norm, eager_norm), (compiled_norm, compiler.compile(compiled_norm, backend=backend))):
        out = fn(x)
        (out * grad).sum().backward()
        results.append((norm.weight.grad, norm.bias.grad, torch.var_mean(x, dim=(0, 2, 3), correction=0)))
    torch.testing.assert_close(results[1], results[0], rtol=1e-5, atol=1e-5)  # (the miss: 0.004)
    mean = compiler.compile(lambda t: torch.var_mean(t, dim=(0, 2, 3), correction=0), backend=backend)(x)[1]
    assert torch.equal(mean, x[0, :, 0, 0])


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int64], ids=str)
def test_logsumexp_rounds_as_eagers_op_by_op_kernel(dtype, dynamic):
    # torch's decomposition computed a bfloat16 input in float32 and rounded once; eager rounds after each op, and
    # the results differed by an ulp nearly everywhere (a matrix product of them by 0.04, found by the fuzzer).
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 4, 5, 6, generator=g) * 4).to(dtype)
    if dtype.is_floating_point:
        x[0, 0, 0, :2] = float("inf")
        x[0, 1, 0, 0] = float("-inf")
        x[0, 2, 1, 3] = float("nan")

    def fn(x):
        return x.logsumexp(3), x.logsumexp((1, 3), keepdim=True), x[:, :, :0].logsumexp(2)

    compiled = compiler.compile(fn, dynamic=dynamic)
    # a 16-bit result is eager's bit for bit; wider ones differ only in the sum's order (an ulp)
    exact = {"rtol": 0, "atol": 0} if dtype in (torch.bfloat16, torch.float16) else {}
    for inputs in (x, x[1:], x[:, :, 2:]):
        torch.testing.assert_close(compiled(inputs), fn(inputs), equal_nan=True, **exact)


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


def _sums_read_before_a_masked_write(x0):
    # (the fuzzer's program d34-1:240) one reduction kernel sums three values and writes the input's new value
    # and the mask, reading rows 2 and 3 through a guarded load
    v1 = torch.clamp(x0, -1, 2)
    s = torch.nan_to_num(v1.sqrt())
    v6 = x0[2:]
    v6[::2] += 1
    total = s.sum() + v1.sum() + x0.sum()
    x0[x0 > 0] = 0
    return total


def test_a_read_guarded_by_a_condition_in_a_reduction_loop_is_not_lost():
    # GCC 12's loop if-conversion turned the guarded read of rows 2 and 3 into zeros in the vectorised loop: the
    # sum was 1.88 for eager's 7.82, without a warning. Kernels are built without loop if-conversion.
    differential(_sums_read_before_a_masked_write, torch.randn(4, 2, 2, generator=torch.Generator().manual_seed(0)))


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


def _expanded_intermediate(x):
    wide = torch.abs(x).expand(3, 2)
    return wide, x.sum()


def _branch_on_an_expanded_intermediate(x):
    wide = torch.abs(x).expand(2)
    total = float(x.sum())  # a graph break: `wide` leaves the first graph
    return (x * 2 if wide.is_contiguous() else x - 1), total


@pytest.mark.parametrize("fn", [_expanded_intermediate, _branch_on_an_expanded_intermediate])
def test_an_expanded_intermediate_is_returned_expanded(fn):
    # An expand of a value the graph computes was returned as a dense buffer: its strides, and so
    # is_contiguous() read after a graph break, differed from eager's.
    for x in (torch.tensor([3]), torch.tensor([[1.5, -2.0]])[:, :1].reshape(1)):
        compiled = compiler.compile(fn, backend="inductor")
        expected, actual = fn(x.clone()), compiled(x.clone())
        assert_same(expected, actual)
        if fn is _expanded_intermediate:
            assert actual[0].stride() == expected[0].stride() and not actual[0].is_contiguous()
        compiler.reset()
