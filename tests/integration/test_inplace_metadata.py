"""In-place metadata ops on arguments, writes into arguments other arguments view and into strided arguments.

Each case calls the same function eagerly and compiled (backend ``inductor``, automatic dynamic shapes)
on twins of the same inputs, several sizes in turn so that later calls run a graph compiled with symbolic
sizes, and compares outputs and the inputs afterwards: shape, strides, storage offset and values.
"""

from __future__ import annotations

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
    compiler.reset()
    yield
    compiler.reset()


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    # A size-1 dim's stride addresses nothing; the caller's view of it is checked through the values.
    kept = [d for d in range(t.dim()) if t.size(d) > 1]
    return tuple(t.shape), [t.stride(d) for d in kept], t.storage_offset()


def _call(fn: Callable[..., Any], args: list[Any]) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args), None
    except Exception as err:
        return None, err


def calls_agree(fn: Callable[..., Any], calls: list[list[Any]], backend: str = "inductor") -> None:
    """Each call's outputs and inputs afterwards match eager; no frame falls back to eager."""
    compiled = compiler.compile(fn, backend=backend)
    for inputs in calls:
        eager_args, compiled_args = [twin(x) for x in inputs], [twin(x) for x in inputs]
        expected, eager_err = _call(fn, eager_args)
        with capture.observe() as seen:
            actual, compiled_err = _call(compiled, compiled_args)
        assert [f.kind for f in seen.frames if f.kind in ("eager", "error")] == []
        assert type(compiled_err) is type(eager_err), (compiled_err, eager_err)
        pairs = list(zip(pytree.tree_leaves(expected), pytree.tree_leaves(actual), strict=True))
        pairs += list(zip(eager_args, compiled_args, strict=True))
        for e, a in pairs:
            if isinstance(e, torch.Tensor):
                assert _layout(a) == _layout(e), [tuple(x.shape) for x in inputs]
                torch.testing.assert_close(a, e)
            else:
                assert a == e


def _sizes(*shapes: tuple[int, ...]) -> list[list[Any]]:
    return [[torch.randn(s)] for s in shapes]


def m_t(x):
    x.t_()
    return x + 1


def m_unsqueeze_softmax(x):
    x.unsqueeze_(0)
    return torch.softmax(x, dim=1)


def m_squeeze(x):
    return x.squeeze_() * 2


def m_transpose_then_write(x):
    x.transpose_(0, 1)
    x.add_(1)
    return x.sum(0)


def m_shape_then_t(x):
    v = torch.arange(x.numel()).view(x.shape)
    x.t_()
    return v


def m_t_across_break(x):
    x.t_()
    y = x * 2
    print(end="")
    return y + x


@pytest.mark.parametrize(
    "fn", [m_t, m_unsqueeze_softmax, m_squeeze, m_transpose_then_write, m_shape_then_t, m_t_across_break]
)
def test_a_metadata_change_of_an_argument_matches_eager_after_recompiles(fn):
    calls_agree(fn, _sizes((3, 4), (3, 4), (5, 6), (2, 3), (1, 4), (0, 3)))


def m_view_across_break(x, n):
    v = x.split(2, 1)[0]
    print(end="")
    x.add_(n)
    return v.max()


def m_row_across_break(x, n):
    v = x[1]
    print(end="")
    x.mul_(n)
    v.add_(1)
    return v * 1, x.sum()


@pytest.mark.parametrize("fn", [m_view_across_break, m_row_across_break])
def test_a_write_into_an_argument_another_argument_views(fn):
    calls_agree(fn, [[torch.randn(3, 3, 1), 3], [torch.randn(3, 3, 2), 5], [torch.randn(3, 3, 3), 5]])


def m_squeeze_then_write(x):
    x.squeeze_()
    x *= 2


def m_write_then_t(x):
    x.add_(1)
    x.t_()
    return x.sum(0)


def m_resize(x):
    x.resize_(2, 3)
    return x[0, :2] + 1


@pytest.mark.parametrize("fn", [m_squeeze_then_write, m_write_then_t])
def test_a_write_and_a_layout_change_of_a_strided_argument(fn):
    # The written argument is a strided view: its new values go where eager writes them, at its strides.
    calls_agree(fn, [[torch.randn(4, 6)[::2, ::2]], [torch.randn(8, 10)[::2, ::2]], [torch.randn(4)[::2]]])


def test_resize_of_an_argument_keeps_the_values_eager_keeps():
    compiled = compiler.compile(m_resize)
    for n in (6, 8, 10):
        eager_x, compiled_x = torch.arange(float(n)), torch.arange(float(n))
        torch.testing.assert_close(compiled(compiled_x), m_resize(eager_x))
        assert _layout(compiled_x) == _layout(eager_x)
        torch.testing.assert_close(compiled_x, eager_x)


def m_unsqueeze_sum(x):
    x.unsqueeze_(0)
    return x.sum(0)


@pytest.mark.parametrize("fn", [m_t, m_unsqueeze_sum])
def test_an_argument_gets_eagers_strides_of_size_one_dims_from_a_dynamic_graph(fn):
    # The caller sees every stride of its tensor, a size-1 dim's too (is_contiguous, view, as_strided).
    compiled = compiler.compile(fn)
    for shape in [(3, 4), (5, 6), (1, 4), (7, 2)]:
        eager_x, compiled_x = torch.randn(shape), torch.randn(shape)
        fn(eager_x), compiled(compiled_x)
        assert (compiled_x.shape, compiled_x.stride()) == (eager_x.shape, eager_x.stride())


@pytest.mark.parametrize(
    "fn",
    [lambda x: x.flatten(0, 1)[..., 1::2], lambda x: x.view(-1, x.shape[2])[..., ::2]],
    ids=["flatten_step", "view_step"],
)
def test_a_strided_view_of_a_reshaped_argument_from_a_dynamic_graph(fn):
    # The output is a view of the argument: the caller then writes through it into the argument.
    calls_agree(fn, _sizes((1, 1, 4), (1, 1, 6), (2, 3, 8)))


def test_an_output_beside_an_input_with_no_storage_of_its_own():
    # Every output's storage is compared with each input's, also inputs the graph only reads as numbers.
    def fn(x, n):
        v = (n - x).movedim(-1, 0)
        if v.max() > 1:
            pass
        return v.unsqueeze(0).expand(1, *v.shape)

    calls_agree(fn, [[torch.randn(1, 1, 1), 1], [torch.randn(1, 1, 1), 5], [torch.randn(1, 3, 2), 5]])


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    ("fn", "shape"),
    [
        (lambda x: (x.unsqueeze_(0), x.reshape(-1))[1], (3,)),
        (lambda x: (x.unsqueeze_(0), x.squeeze(0))[1], (3,)),
        (lambda x: (x.t_(), x.t())[1], (2, 3)),
    ],
    ids=["reshape_back", "squeeze_back", "transpose_back"],
)
def test_a_view_that_undoes_an_argument_metadata_change_is_a_new_tensor(backend, fn, shape):
    """The result views the whole argument in the layout it came with, but eager's result is a new tensor: it
    must not be the argument itself, which takes its new metadata after the graph."""
    x = torch.randn(shape)
    eager_x, compiled_x = x.clone(), x.clone()
    expected = fn(eager_x)
    actual = compiler.compile(fn, backend=backend)(compiled_x)
    assert actual.shape == expected.shape and actual.stride() == expected.stride()
    assert compiled_x.shape == eager_x.shape and compiled_x.stride() == eager_x.stride()
    torch.testing.assert_close(actual, expected)
    assert (actual is compiled_x) == (expected is eager_x)


def m_local_used_then_unsqueezed(x):
    v = x.clamp(min=1)
    x.mul_(v)  # reads v in the layout it has here
    v.unsqueeze_(0)
    return v


def m_local_used_then_transposed(x):
    v = x // 3
    v += v.sum(0)
    v.t_()
    return v * 2


@pytest.mark.parametrize("fn", [m_local_used_then_unsqueezed, m_local_used_then_transposed])
def test_an_in_place_metadata_change_of_a_local_after_it_was_used(fn):
    """The backend checks each op on its arguments as they were at that op, not as a later ``unsqueeze_``
    left them (an op checked on the later layout raised a broadcast error eager never raises)."""
    calls_agree(fn, _sizes((2, 3), (1, 1), (0, 3), (4, 3)))


# ------------------------------------------------------------------ writes into arguments that are not dense


def _augmented(x):
    x += 1


WRITES = {
    "sub_": lambda x: x.sub_(1),
    "augmented": _augmented,
    "index_put": lambda x: x.__setitem__(torch.tensor([0]), 5.0),
    "out": lambda x: torch.add(x, 1, out=x),
    "relu_inplace": lambda x: torch.nn.functional.relu(x, inplace=True),
    "hardtanh_module": torch.nn.Hardtanh(inplace=True),  # passes ``inplace`` by position
    "fill_": lambda x: x.fill_(3),
    "method_of_the_class": lambda x: torch.Tensor.mul_(x, 2),
}

LATER_CHOICES = {
    "flatten": lambda x: x.view(x.shape).flatten(),  # eager copies: the written argument keeps its gaps
    "reshape": lambda x: (x[:].reshape(-1), x * 2),
    "view": lambda x: x.view(x.shape).view(-1),  # eager refuses: no view of a tensor with gaps spans them
    "contiguous": lambda x: x[:].contiguous(),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("later", list(LATER_CHOICES))
@pytest.mark.parametrize("write", list(WRITES))
def test_a_written_argument_with_gaps_keeps_its_strides_for_later_choices(backend, write, later):
    """Functionalization gives a tensor written in place the layout of the out-of-place result; for an argument
    with gaps between its rows that layout differs from eager's, and ``flatten``, ``reshape``, ``contiguous``
    and ``view`` of a view of it then view where eager copies, or succeed where eager raises."""
    first, then = WRITES[write], LATER_CHOICES[later]

    def fn(x):
        first(x)
        return then(x)

    rows = [torch.randn(4, 3)[::2], torch.randn(6, 5)[::2], torch.randn(3, 6)[:, 1:4]]
    calls_agree(fn, [[x] for x in rows], backend=backend)


# Out-of-place twins that return a contiguous result whatever their input's order: functionalization gave the
# written tensor that layout, and what later ops computed from it got other strides than eager's.
REORDERING_WRITES = {
    "masked_fill_": lambda v: v.masked_fill_(v > 0, 0.25),
    "scatter_": lambda v: v.scatter_(0, torch.zeros_like(v, dtype=torch.long), 1.5),
    "index_add_": lambda v: v.index_add_(0, torch.tensor([0]), v[:1] * 2),
    "tril_": lambda v: v.tril_(),
    "cumsum_": lambda v: v.cumsum_(0),
    "masked_scatter_": lambda v: v.masked_scatter_(v < 0, v * 3),
    "mul_": lambda v: v.mul_(2),  # laid out as its input: right before the fix too
}

ORDERS = {
    "transposed_view": lambda x: x.mT,
    "channels_last_argument": lambda x: x,
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("write", list(REORDERING_WRITES))
def test_a_write_into_a_dense_tensor_in_another_order_keeps_its_layout(backend, write, order):
    first, view = REORDERING_WRITES[write], ORDERS[order]

    def fn(x):
        v = view(x)
        first(v)
        return v * 2 + v, x.flatten()

    if order == "channels_last_argument":
        shapes = [(2, 3, 4, 5), (3, 3, 2, 6)]
        calls = [[torch.randn(s).to(memory_format=torch.channels_last)] for s in shapes]
    else:
        calls = [[torch.randn(s)] for s in ((3, 4), (5, 2), (2, 6))]
    calls_agree(fn, calls, backend=backend)


# ------------------------------------------------------------------ writes through inplace=True


def w_flag_then_unsqueeze(x):
    torch.nn.functional.hardtanh(x, -1.0, 1.0, True)  # ``inplace`` by position
    x.unsqueeze_(0)


def w_keyword_flag_then_unsqueeze(x):
    torch.nn.functional.relu(x, inplace=True)
    x.unsqueeze_(0)


def w_flag_on_a_transposed_view(x):
    row = x.narrow(-2, 0, 1)
    if row.flatten()[0] <= 0:  # a break on data: the write is in the resumed graph
        row.amax(0, keepdim=True)
    v = x.t()
    torch.nn.functional.relu(v, inplace=True)
    return v


def w_flag_on_views_across_a_break(x):
    v1 = x.squeeze(0)
    torch.nn.functional.hardtanh(v1, -1.0, 1.0, True)
    v7 = v1.unsqueeze(0).expand(1, *v1.shape)
    print(end="")
    torch.nn.functional.hardtanh(x.unbind(1)[0], -1.0, 1.0, True)
    v7[..., 0] += 1


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    "fn",
    [w_flag_then_unsqueeze, w_keyword_flag_then_unsqueeze, w_flag_on_a_transposed_view, w_flag_on_views_across_a_break],
)
def test_a_call_passing_inplace_true_writes_its_argument_as_eager_does(backend, fn):
    """``F.relu(x, inplace=True)`` and ``F.hardtanh(x, -1.0, 1.0, True)`` write ``x`` as ``x.relu_()`` does: the
    checks of writes into inputs see them (a write and a layout change of one input in one graph is a break)."""
    two_dims = fn in (w_flag_on_a_transposed_view, w_flag_on_views_across_a_break)
    if two_dims:
        calls = [[torch.randn(6, 3)[::2]], [torch.randn(2, 2)], [torch.randn(8, 4)[1::2]]]
    else:
        calls = [[torch.randn(5)[1:]], [torch.randn(7)[1::2]], [torch.randn(4)[::2]]]
    calls_agree(fn, calls, backend=backend)


# ------------------------------------------------------------------ a write into an input another input views


def w_into_one_read_the_other(x, y):
    x.mul_(2)
    return y + 1


def w_resumed_with_a_view_or_a_copy(x0):
    if x0.shape[0] % 2 == 0:
        v1 = x0[x0.shape[0] // 2 :]
    else:
        v1 = x0 + x0
    print(end="")  # the resumed graph gets v1 as an input of its own
    x0.mul_(2)
    return v1 * 1


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_graph_writing_into_an_input_is_not_reused_when_another_input_views_it(backend):
    """A graph compiled for inputs in separate memory reads the unwritten one before the write lands: called
    again with a view of the written input as the other, it must not serve that call (fuzzer class v-0:669)."""
    compiled = compiler.compile(w_into_one_read_the_other, backend=backend)
    torch.testing.assert_close(compiled(torch.ones(4, 3), torch.ones(4, 3)), torch.full((4, 3), 2.0))
    eager_base, compiled_base = torch.arange(15.0).view(5, 3), torch.arange(15.0).view(5, 3)
    expected = w_into_one_read_the_other(eager_base[:4], eager_base[1:])  # rows 1-3 of y are written first
    torch.testing.assert_close(compiled(compiled_base[:4], compiled_base[1:]), expected)
    torch.testing.assert_close(compiled_base, eager_base)
    calls_agree(
        w_resumed_with_a_view_or_a_copy, [[torch.randn(3, 1)], [torch.randn(5, 1)], [torch.randn(6, 1)]], backend
    )


def _contiguous_then_unsqueezed(x):
    flat = x.to(torch.float32).reshape(-1)
    same = flat.contiguous()  # flat itself: eager returns the tensor it was given
    flat.unsqueeze_(0)
    return same, same is flat


def _converted_then_transposed(x):
    y = x * 2
    same = y.to(y.dtype)
    y.t_()
    return same.shape, same + 1


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_contiguous_then_unsqueezed, _converted_then_transposed])
def test_an_op_returning_its_own_argument_shares_its_later_layout_changes(backend, fn):
    # `contiguous` of a contiguous tensor and `to` its own dtype return the argument itself: the trace gave
    # the result a node of its own, which kept the old layout after the argument's unsqueeze_.
    calls_agree(fn, [[torch.arange(6.0).view(2, 3)], [torch.zeros(0, 2)]], backend=backend)


def transposed_then_counted(x0, x1):
    v1 = x0.view(x0.shape[0], -1)
    v1[0] = 1
    v2 = x1.view(x1.shape[0], -1)
    v1.unsqueeze_(0)  # a break: the graph would both write x0 and change its layout
    v1.transpose_(0, 1)
    x1 += v1.numel()  # a break: x1's memory is shared with v2, so this runs in Python
    return v2


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_size_needed_after_a_graph_that_transposes_its_input_is_not_read_from_the_moved_dim(backend):
    # The resume function's graph transposed its input in place, and the Python after it rebuilt numel's symbol
    # from the input's size()[1], read after the transpose: x1 got 1 added where eager adds 2, without a warning.
    compiler.reset()
    compiled = compiler.compile(transposed_then_counted, backend=backend)
    for call, (s0, s1) in enumerate([(1, 0), (2, 1), (3, 2)]):
        g = torch.Generator().manual_seed(call)
        x0, x1 = torch.randn(s0, 1, s1, s1, generator=g), torch.randn(s0, 1, s0, 1, generator=g)
        eager_args, compiled_args = (x0.clone(), x1.clone()), (x0.clone(), x1.clone())
        with torch.no_grad():
            expected, actual = transposed_then_counted(*eager_args), compiled(*compiled_args)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(compiled_args, eager_args)
        assert _layout(compiled_args[0]) == _layout(eager_args[0])


# ------------------------------------------------------------------ out= tensors of another shape than the result


def _into_a_view(x, o):
    torch.add(x, 1, out=o[:0])  # eager resizes the empty view over o's memory: o's first elements change
    return o


def _into_a_local(x):
    o = torch.empty(0)
    torch.add(x, 1, out=o)
    return o * 2


OUT_RESIZES = {
    "argument": (lambda x, o: torch.add(x, 1, out=o), "the graph's input"),
    "view_of_an_argument": (_into_a_view, "a view"),
    "tuple_into_an_argument": (lambda x, o: torch.sort(x, out=(o, torch.empty(0, dtype=torch.long))), "input"),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("case", list(OUT_RESIZES))
def test_an_out_of_another_shape_than_the_result_is_resized_as_eager_does(backend, case):
    """Eager resizes an ``out=`` tensor to the result's shape; AOT autograd copies the result back into an input
    (a copy cannot resize it) and never sees a view's base change: such a call runs in Python, with its reason."""
    fn, reason = OUT_RESIZES[case]
    calls_agree(fn, [[torch.randn(3), torch.randn(4)], [torch.randn(5), torch.empty(0)]], backend=backend)
    compiler.reset()
    with capture.observe() as seen:
        compiler.compile(fn, backend=backend)(torch.randn(3), torch.randn(4))
    reasons = [brk.reason for frame in seen.frames for brk in frame.graph_breaks]
    assert any("resizes its out= tensor" in r and reason in r for r in reasons), reasons


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_out_the_graph_made_is_resized_inside_the_graph(backend):
    calls_agree(_into_a_local, [[torch.randn(3)], [torch.randn(5)]], backend=backend)
    compiler.reset()
    with capture.observe() as seen:
        compiler.compile(_into_a_local, backend=backend)(torch.randn(3))
    assert [brk.reason for frame in seen.frames for brk in frame.graph_breaks] == []


def _into_a_view_of_a_local(x):
    v = x * 3
    torch.mul(3, 2, out=v[:0])  # a 0-d result: the empty view is resized over v's memory
    return v


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(0,), (0, 8), (2, 8)])
def test_an_out_view_made_under_inference_mode_is_resized_as_eager_does(backend, shape):
    """Under inference mode a view records no base (``_is_view()`` is False), so the view ``out=`` was taken for a
    tensor of the graph's own and resized inside it: the compile failed (fuzz a227:309). What shares the
    memory of another of the graph's values is a view."""
    with torch.inference_mode(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's deprecation of resizing a non-empty out
        calls_agree(_into_a_view_of_a_local, [[torch.randn(shape)], [torch.randn(shape)]], backend=backend)


def _returns_its_argument_scaled(x):
    return x.mul_(3)


def _returns_its_argument_after_a_break(x):
    y = x.add_(1)
    print(end="")
    return y.mul_(3), y


@pytest.mark.parametrize("fn", [_returns_its_argument_scaled, _returns_its_argument_after_a_break])
@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_an_in_place_ops_result_on_an_argument_is_that_argument(fn, backend, dynamic):
    # Eager's ``x.mul_(3)`` returns ``x`` itself; AOT autograd with symbolic sizes returned a new tensor over its
    # memory (``is`` false, not a view, its attributes not ``x``'s).
    compiled = compiler.compile(fn, backend=backend, dynamic=dynamic)
    for start in (1, 2):
        x = torch.zeros(6, 4)[start : start + 4]
        x.tag = "mine"
        results = compiled(x)
        for result in results if isinstance(results, tuple) else (results,):
            assert result is x and result.tag == "mine"


def _made_then_transposed(x):
    v = x * 2
    v.transpose_(0, 1)
    print(end="")  # the graph returns `v` to the rest of the frame
    v.detach_()
    return v._is_view(), v._base is None, v.stride(), v


def _made_then_transposed_without_gradients(x):
    v = x * 2
    with torch.no_grad():
        v.transpose_(0, 1)
    return v


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("shape", [(2, 3), (1, 0, 0), (2, 3, 4)])
def test_a_tensor_the_graph_made_and_transposed_in_place_is_no_view(backend, shape):
    # a275-0:84. Eager's `x * 2` transposed in place is no view; compiled it came back as one (the node's layout
    # restored for the backend showed the backend a view; AOT autograd rebuilt it as a view of its own tensor),
    # whose `detach_()` autograd refused.
    x = torch.randn(shape)
    expected, actual = _made_then_transposed(x), compiler.compile(_made_then_transposed, backend=backend)(x)
    assert actual[:3] == expected[:3]
    torch.testing.assert_close(actual[3], expected[3])
    leaf = torch.randn(shape, requires_grad=True)
    # (requiring grad, AOT autograd's view would stand for it: left to Python, never a failed compile)
    with capture.config.patch(strict=True):
        actual = compiler.compile(_made_then_transposed_without_gradients, backend=backend)(leaf)
    expected = _made_then_transposed_without_gradients(leaf)
    assert (actual._is_view(), actual.stride(), type(actual.grad_fn)) == (
        expected._is_view(),
        expected.stride(),
        type(expected.grad_fn),
    )
    actual.detach_()
