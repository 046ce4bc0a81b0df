"""The default backend against eager: layouts.

Aten calls reading views with a storage offset, the strides of new outputs (copies, ops whose fake kernels lay
results out otherwise, expanded intermediates), in-place ops on inputs with odd layouts, and inputs of other
sizes and layouts after a dynamic recompile.

Most cases run the function eagerly and compiled through ``inductor_differential.differential``, which
compares results, inputs after the call and exceptions; a frame that fell back to eager fails.
"""

from __future__ import annotations

import pytest
import torch
from inductor_differential import assert_same, differential

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


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


_PIECES_WRITTEN = {
    "chunk_relu_": lambda x: torch.relu_(x.chunk(2, 1)[-1]),
    "split_add_": lambda x: x.split(1, 1)[-1].add_(1),
    "unbind_mul_": lambda x: x.unbind(0)[-1].mul_(2),
    "slice_then_input_written": lambda x: (x[:, 1:], x.mul_(2))[0],
}


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize("fn", list(_PIECES_WRITTEN))
def test_a_piece_of_a_written_input_at_an_offset_is_eagers_view(fn, rows, dynamic):
    # a261.2:190. The graph's new value of the input came from an aten kernel (`slice_scatter` taking symbolic
    # sizes) whose result starts part-way into a storage of its own; AOT autograd counted the returned view's
    # offset from the input's start on top of that: the view landed past eager's (offset 8 for 5), or out of
    # the storage (a RuntimeError). Each call's input is a row of a larger tensor at another offset.
    compiled = compiler.compile(_PIECES_WRITTEN[fn], backend="inductor", dynamic=dynamic)
    for call, (start, cols) in enumerate([(0, 3), (1, 3), (2, 3), (1, 4), (2, 5)]):
        eager_base = torch.randn(4, cols, generator=torch.Generator().manual_seed(call))
        base = eager_base.clone()
        expected = _PIECES_WRITTEN[fn](eager_base.narrow(0, start, rows))
        actual = compiled(base.narrow(0, start, rows))
        _same_view_of_the_same_memory(actual, expected, base, eager_base, call)


def _same_view_of_the_same_memory(actual, expected, base, eager_base, call):
    """``actual`` is the view of ``base`` that ``expected`` is of ``eager_base``, and the two bases agree."""
    layouts = [(t.shape, t.stride(), t.storage_offset()) for t in (actual, expected)]
    assert layouts[0] == layouts[1], call
    assert actual.untyped_storage().data_ptr() == base.untyped_storage().data_ptr(), call
    torch.testing.assert_close(actual, expected, equal_nan=True)
    torch.testing.assert_close(base, eager_base, equal_nan=True)


_PIECES_OF_A_ROW_WRITTEN = {
    "chunk_relu_": lambda x: torch.relu_(x.chunk(2, -1)[-1]),
    "tensor_split_add_": lambda x: x.tensor_split(2, -1)[1].add_(1),
    "view_of_chunk_add_": lambda x: x.chunk(2, -1)[-1].view(-1).add_(1),
    "slice_add_": lambda x: x[1:].add_(1),
}


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("fn", list(_PIECES_OF_A_ROW_WRITTEN))
def test_a_piece_of_a_written_input_under_inference_mode_is_eagers_view(fn, backend):
    # a275-0:36. Under inference mode AOT autograd rebuilt a written input's piece of `chunk` with symbolic sizes
    # at its offset counted twice: other elements returned (offset 10 for 6), or a RuntimeError.
    compiled = compiler.compile(_PIECES_OF_A_ROW_WRITTEN[fn], backend=backend, dynamic=True)
    for call, (start, cols) in enumerate([(1, 4), (2, 6), (1, 8)]):
        eager_base = torch.arange(4.0 * cols).view(4, cols)
        base = eager_base.clone()
        eager_row, row = eager_base[start], base[start]  # (views made outside inference mode)
        with torch.inference_mode():
            expected = _PIECES_OF_A_ROW_WRITTEN[fn](eager_row)
            actual = compiled(row)
        _same_view_of_the_same_memory(actual, expected, base, eager_base, call)


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


@pytest.mark.parametrize(
    "memory_format", [None, torch.preserve_format, torch.contiguous_format, torch.channels_last], ids=str
)
@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(2, 3, 4, 5).transpose(1, 3),
        lambda: torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),
        lambda: torch.randn(2, 3, 4, 5),
    ],
    ids=["transposed", "channels_last", "contiguous"],
)
@pytest.mark.parametrize("template", ["same_size", "fewer_elements"])
def test_resize_as_lays_its_result_out_as_eager(make, memory_format, template):
    # Without a memory format eager's kernel only resizes; torch's decomposition restrided a transposed tensor
    # of the same size to contiguous over its memory as it lay, and the elements came back transposed.
    x = make()
    like = torch.empty(x.shape) if template == "same_size" else torch.empty(2, 3, 2, 5)
    if memory_format is torch.channels_last and like.dim() != 4:
        pytest.skip("channels-last needs four dims")

    def fn(x, like):
        return x.clone().resize_as_(like, memory_format=memory_format) * 1

    differential(fn, x, like)


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(5, 4, 3).mT.contiguous().mT,
        lambda: torch.randn(5, 4, 6)[..., ::2],
        lambda: torch.randn(5, 4, 3),
    ],
    ids=["column_major", "gaps", "contiguous"],
)
def test_select_scatter_lays_its_result_out_as_eager(make, dim):
    # eager's result keeps its input's order and gaps; torch's decomposition's was contiguous
    x = make()
    src = torch.randn(*(n for d, n in enumerate(x.shape) if d != dim % x.dim()))
    differential(lambda x, src: torch.select_scatter(x, src, dim, 1), x, src)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(2, 6, 5, 4).to(memory_format=torch.channels_last),
        lambda: torch.randn(2, 6, 5, 4, 3).to(memory_format=torch.channels_last_3d),
        lambda: torch.randn(2, 6, 5, 4).transpose(2, 3),
        lambda: torch.randn(2, 6, 5, 8)[..., ::2],
        lambda: torch.randn(2, 6, 5),
    ],
    ids=["channels_last", "channels_last_3d", "transposed", "gaps", "three_dims"],
)
def test_channel_shuffle_lays_its_result_out_as_eager(make):
    # eager's kernel keeps a channels-last input's format; the decomposition's views gave a contiguous result
    differential(lambda x: torch.nn.functional.channel_shuffle(x, 3), make())
