"""The default backend against eager: aliasing.

Outputs share storage where eager's do and never where eager's are apart; writes into tensors whose elements
share memory (expanded tensors, overlapping operands, a tensor assigned into its own region) write or refuse
as eager does.

Most cases run the function eagerly and compiled through ``inductor_differential.differential``, which
compares results, inputs after the call and exceptions; a frame that fell back to eager fails.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from inductor_differential import differential

import dynajit.capture as capture
from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


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


def _setitem_by_name(x):
    x.__setitem__(slice(1, None), x[:-1])
    return x


_INDEX = torch.tensor([0, 1])
_READS_ITS_TARGET_AS_AN_OPERAND = {
    "scatter_self": lambda x: x.scatter_(0, torch.zeros_like(x, dtype=torch.long), x),
    "scatter_add_self": lambda x: x.scatter_add_(0, torch.zeros_like(x, dtype=torch.long), x),
    "scatter_reduce_self": lambda x: x.scatter_reduce_(0, torch.zeros_like(x, dtype=torch.long), x, "amax"),
    "index_copy_self": lambda x: x.index_copy_(0, _INDEX, x),
    "index_add_self": lambda x: x.index_add_(0, _INDEX, x),
    "index_put_self": lambda x: x.index_put_((_INDEX,), x),
    "index_put_accumulate_self": lambda x: x.index_put_((_INDEX,), x, accumulate=True),
    "masked_scatter_self": lambda x: x.masked_scatter_(x > 2, x),
    "put_self": lambda x: x.put_(torch.arange(x.numel()), x.flatten()),
    "cat_out_overlapping": lambda x: torch.cat([x[:1], x[:1]], out=x),
    "mm_out_self": lambda x: torch.mm(x[:, :2], x[:2, :2], out=x[:, :2]),
    "setitem_by_name": _setitem_by_name,
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(_READS_ITS_TARGET_AS_AN_OPERAND))
def test_an_op_reading_its_written_tensor_as_another_operand_does_what_eager_does(backend, name):
    """A scatter, an index write, a ``cat`` or ``mm`` into ``out=``, whose operand is the written tensor (or
    overlaps it), even in the same layout: eager refuses the overlap ("some elements of the input tensor and the
    written-to tensor refer to a single memory location"), or reads elements it has already written; the graph
    computed from the values before the write, silently. Only an elementwise op reads each element for its own
    write alone. (``x.__setitem__(k, v)`` called by name is the write ``x[k] = v`` is.)"""
    fn = _READS_ITS_TARGET_AS_AN_OPERAND[name]
    # (a vector for these two: a matrix's rows are apart, and its ``flatten`` is a view in another layout)
    x = torch.arange(6.0) if name in ("put_self", "setitem_by_name") else torch.arange(8.0).view(2, 4)
    differential(fn, x, compiled=compiler.compile(fn, backend=backend))


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


# ------------------------------------------------------------------ views that read the same bits as another type


def _bits_incremented(x):
    return x.view(torch.int32).add_(1)


def _complex_parts_doubled(z):
    return torch.view_as_real(z).mul_(2)


def _value_and_its_bits(x):
    y = x * 2
    return y, y.view(torch.int32)


@pytest.mark.parametrize(
    "fn, make",
    [
        (_bits_incremented, lambda: torch.tensor([1.0, -2.0, 0.5, 3.0])),
        (_complex_parts_doubled, lambda: torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)),
        (_value_and_its_bits, lambda: torch.tensor([1.0, -2.0])),
    ],
)
def test_outputs_sharing_memory_as_another_dtype_are_its_bits(fn, make):
    # Outputs viewing one storage were all returned as views of its base's buffer, in the base's dtype: a float
    # written back through an int32 view became the int's value converted, not its bits.
    differential(fn, make())


def _bits_of_a_transpose_beside_it(x):
    # (the fuzzer's program a234:1837) a dtype view of a view, returned beside that view
    t = x.clone().mT
    bits = t.view(torch.int32)
    bits.add_(1)
    return t, bits


def _bits_of_a_slice_beside_it(x):
    piece = (x * 2)[1:]
    return piece, piece.view(torch.int16), piece.view(torch.int32).mT


def _bits_of_a_selected_row_after_a_break(x):
    # the graph ends at the break, returning the row and its bits
    row = x.clone().permute(2, 0, 1)[0]
    bits = row.view(torch.int32)
    with torch.enable_grad():
        print(end="")
    bits.add_(2)
    return row, bits


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize(
    "fn", [_bits_of_a_transpose_beside_it, _bits_of_a_slice_beside_it, _bits_of_a_selected_row_after_a_break]
)
def test_a_dtype_view_of_a_view_is_returned_beside_that_view(backend, requires_grad, fn):
    """AOT autograd rebuilt the dtype view from the other output by replaying its recorded views, which applied
    the first view twice: its shape check raised at every call (torch.compile with ``aot_eager`` raises too)."""

    def run(f):
        x = torch.linspace(-2, 2, 24).reshape(3, 2, 4).requires_grad_(requires_grad)
        outs = f(x)
        kinds = [(o.dtype, o.shape, o.stride(), o._is_view(), o.requires_grad) for o in outs]
        if requires_grad:
            outs[0].sum().backward()
        return [o.detach() for o in outs], kinds, x.grad

    compiled = compiler.compile(fn, backend=backend)
    for _ in range(2):
        (values, kinds, grad), (expected_values, expected_kinds, expected_grad) = run(compiled), run(fn)
        assert kinds == expected_kinds
        torch.testing.assert_close((values, grad), (expected_values, expected_grad), rtol=0, atol=0)


def _bits_incremented_beside_a_masked_write_into_an_input_view(x0, x1):
    # (the fuzzer's program a238:701) AOT autograd must rebuild the input's view from the recorded views: rebuilt
    # from autograd's view functions, it read the values as they were before the write
    x0.clone().view(torch.int32).add_(1)
    row = x1.select(-4, -1)
    row[row > 0] = 0
    return row


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_dtype_view_beside_a_write_into_a_view_of_an_input(backend, dynamic):
    def make():
        generator = torch.Generator().manual_seed(0)
        return torch.randn(1, 1, generator=generator), torch.randn(4, 1, 1, 1, generator=generator)[::2]

    fn = _bits_incremented_beside_a_masked_write_into_an_input_view
    differential(fn, *make(), compiled=compiler.compile(fn, backend=backend, dynamic=dynamic))
