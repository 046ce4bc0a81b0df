"""Training graphs against eager: views and layout changes of tensors requiring grad.

In-place layout changes (``t_``, ``squeeze_``, ``unsqueeze_``, ``transpose_``), views a graph returns or takes
across a graph break, and the pieces of ``split``, ``chunk`` and ``unbind``, which autograd refuses to change
in place.

Each case runs the same function eagerly and through ``dynajit.compiler.compile`` on fresh copies of the same
leaves, runs a backward, and compares outputs, inputs after the call, gradients and exceptions.
"""

from __future__ import annotations

import math

import pytest
import torch

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


# ------------------------------------------------------------------ layout changes of tensors requiring grad


def _no_op_squeeze(x):
    y = x.exp()
    x.squeeze_()
    return y


def _no_op_transpose(x):
    y = x * 2
    x.transpose_(1, 1)
    return y, x.t_() if x.dim() < 2 else y + 1


def _transposed_then_clamped(x):
    x.t_()
    return x.clamp(min=0.0) * 2


def _written_then_contiguous(x):
    y = x.contiguous()
    x.squeeze(1).add_(2)
    return y, x.reshape(-1)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    ("fn", "shape", "strided"),
    [
        (_no_op_squeeze, (2, 3), False),
        (_no_op_transpose, (3, 2), False),
        (_transposed_then_clamped, (2, 3), False),
        (_transposed_then_clamped, (2, 3), True),
        (_written_then_contiguous, (4, 1), True),
    ],
)
def test_an_input_requiring_grad_keeps_its_outputs_gradients_and_layout(backend, fn, shape, strided):
    # A layout change that changes nothing made AOT autograd drop requires_grad from every output; a real one it
    # applied after the forward, which autograd took for a write into the input the backward saved; a write into
    # a strided input requiring grad made it write into a contiguous copy, so `contiguous` returned the copy.
    def run(f):
        leaf = torch.linspace(-1, 1, 2 * shape[0] * shape[1]).view(2 * shape[0], shape[1]).requires_grad_()
        x = leaf.clone()[::2] if strided else leaf.clone()[: shape[0]]
        outs = f(x)
        outs = outs if isinstance(outs, tuple) else (outs,)
        assert all(o.requires_grad for o in outs)
        sum((o * torch.arange(o.numel()).view(o.shape)).sum() for o in outs).backward()
        return [o.detach() for o in outs], leaf.grad, x.detach()

    expected = run(fn)
    actual = run(compiler.compile(fn, backend=backend))
    torch.testing.assert_close(actual, expected)


def _transposed_then_written_after_a_break(x):
    y = x * 3
    y.t_()
    scale = float(y.detach().sum())  # a graph break: y leaves the first graph as a view it made
    y.sub_(1)
    return y * scale


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_view_a_training_graph_returns_can_be_written_in_place_as_in_eager(backend):
    def run(f):
        leaf = torch.linspace(-1, 1, 6).view(2, 3).requires_grad_()
        out = f(leaf.clone())
        (out * torch.arange(6.0).view(out.shape)).sum().backward()
        return out.detach(), leaf.grad

    torch.testing.assert_close(
        run(compiler.compile(_transposed_then_written_after_a_break, backend=backend)),
        run(_transposed_then_written_after_a_break),
    )


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_layout_change_of_an_input_a_module_saves_keeps_the_backward_working(backend):
    # The input needs no grad, but Linear saves it for its weight's gradient; AOT autograd would apply the
    # unsqueeze_ to it after the forward, and autograd would refuse the backward.
    lin = torch.nn.Linear(4, 3)

    def fn(x):
        x.unsqueeze_(0)
        return lin(x)

    def run(f):
        lin.zero_grad()
        x = torch.linspace(-1, 1, 4)
        out = f(x)
        out.sum().backward()
        return out.detach(), x, lin.weight.grad, lin.bias.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))


def _transposed_after_a_view_was_taken(x):
    y = torch.maximum(x, x)
    v = y.narrow(1, 0, 1)
    y.transpose_(0, 1)
    return v


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_layout_change_of_a_tensor_with_a_view_keeps_the_views_gradients(backend):
    # AOT autograd's functionalization gives a view taken before an in-place layout change of its base wrong
    # gradients (2, 3 came out as 5, 0); the change runs in Python, after the graph, where the base returned by
    # the graph must be the base (not a view autograd then forbids in-place ops on).
    def run(f):
        leaf = torch.tensor([[0.5], [-1.5]]).requires_grad_()
        out = f(leaf.clone())
        (out * torch.tensor([[2.0], [3.0]])).sum().backward()
        return out.detach(), leaf.grad

    expected = run(_transposed_after_a_view_was_taken)
    torch.testing.assert_close(run(compiler.compile(_transposed_after_a_view_was_taken, backend=backend)), expected)


def _projected_then_unsqueezed(x, norm):
    y = torch.nn.functional.linear(norm(x), torch.ones(2, 2))
    y.unsqueeze_(0)  # a graph break (a layout change of a tensor requiring grad)
    return y


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(2, 1, 2, 2), (0, 1, 0, 2)])
def test_a_training_graphs_output_laid_out_as_a_view_may_be_changed_in_place(backend, shape):
    # The backend returned the 4-d result of a matmul as a view of its 2-d buffer; coming out of AOT autograd's
    # autograd.Function, autograd refused the in-place op on that view, which eager allows on its fresh tensor.
    norm = torch.nn.LayerNorm(2)

    def run(f):
        norm.zero_grad()
        out = f(torch.linspace(-1, 1, math.prod(shape)).view(shape), norm)
        (out * 3).sum().backward()
        return out.detach(), norm.weight.grad

    torch.testing.assert_close(
        run(compiler.compile(_projected_then_unsqueezed, backend=backend)), run(_projected_then_unsqueezed)
    )


def _transposed_then_viewed(x):
    y = 0.5 * x
    y.transpose_(0, 1)
    return y, y.unsqueeze(0).expand(1, *y.shape)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(1, 0, 1), (3, 2, 1)])
def test_a_view_taken_after_a_layout_change_of_a_tensor_requiring_grad_is_eagers(backend, shape):
    # AOT autograd rebuilt the returned expand from the tensor's layout before the transpose_ and raised.
    def run(f):
        leaf = torch.linspace(-1, 1, math.prod(shape)).view(shape).requires_grad_()
        outs = f(leaf.clone())
        sum((o * 2).sum() for o in outs).backward()
        return [o.detach() for o in outs], [o.shape for o in outs], leaf.grad

    torch.testing.assert_close(
        run(compiler.compile(_transposed_then_viewed, backend=backend)), run(_transposed_then_viewed)
    )


# ------------------------------------------------------------------ the pieces of split, chunk and unbind


def _chunk_written_after_a_break(x):
    y = x * 2
    a = y.chunk(2)[0]
    print(end="")  # a graph break: `a` leaves the graph beside its base
    a.mul_(3)
    return y


def _split_of_an_input_written(x):
    a, b = x.split(2)
    a.add_(1)
    return b * 2


def _unbind_written_after_a_break(x):
    a = (x + 1).unbind(0)[0]
    print(end="")  # `a` leaves the graph without its base
    a.add_(1)
    return a


def _view_made_under_no_grad_written(x):
    with torch.no_grad():
        a = x[0]
    print(end="")
    a.add_(1)
    return x


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    "fn",
    [_chunk_written_after_a_break, _split_of_an_input_written, _unbind_written_after_a_break,
     _view_made_under_no_grad_written],
)  # fmt: skip
def test_an_in_place_op_on_a_view_autograd_refuses_raises_as_in_eager(backend, fn):
    # Autograd refuses in-place ops on the pieces of split/chunk/unbind of a tensor requiring grad and on views
    # made under no_grad. A backend returns such a piece as a plain view or as a tensor sharing its base's memory,
    # which the op after the graph break wrote without a word.
    def run(f):
        x = torch.linspace(-1, 1, 8).view(4, 2).requires_grad_().clone()
        with pytest.raises(RuntimeError) as raised:
            f(x)
        return raised.value

    eager = run(fn)
    compiled = run(compiler.compile(fn, backend=backend))
    assert "inplace" in str(eager) and "inplace" in str(compiled), (eager, compiled)


def _squeezed_in_place(x):
    x.squeeze_()  # no size-1 dim: the layout stays as it is
    return x * 2


def _a_result_of_autograd(n):
    return torch.linspace(-1, 1, 2 * n).view(2, n).requires_grad_() * 1


def _a_leaf(n):
    return torch.linspace(-1, 1, 2 * n).view(2, n).requires_grad_()


def _a_piece_of_unbind(n):
    return torch.linspace(-1, 1, 6 * n).view(3, 2, n).requires_grad_().unbind(0)[0]


def _a_view_made_under_no_grad(n):
    base = torch.linspace(-1, 1, 4 * n).view(2, 2, n).requires_grad_() * 1
    with torch.no_grad():
        return base[0]


_KINDS = [_a_result_of_autograd, _a_leaf, _a_piece_of_unbind, _a_view_made_under_no_grad]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("first", _KINDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("then", _KINDS, ids=lambda f: f.__name__)
def test_an_in_place_no_op_raises_as_in_eager_whatever_tensor_came_first(backend, first, then):
    # Autograd refuses any in-place op, even one that changes nothing, on a leaf requiring grad and on views
    # it cannot rebase. Whether a tensor is a leaf or a view is not in its guards, and an input's fake is a
    # view only while its sizes are static: the graph of the first call dropped the op as a no-op and then
    # answered calls with tensors eager refuses (a later size too, compiled with symbolic sizes).
    compiled = compiler.compile(_squeezed_in_place, backend=backend)
    _assert_outcomes_as_eagers(_squeezed_in_place, compiled, ((first, 3), (then, 3), (then, 4), (then, 5)))


def _detached_then_squeezed(x):
    v = x[..., :]
    x.detach_()  # (a graph break: eager cuts the history of the caller's tensor in place)
    x.squeeze_()  # no size-1 dim: only the version moves on, and `v`'s history is rebuilt from `x`'s, now none
    return v.clamp(min=-0.5)


def _squeezed_beside_a_view(x, v):
    x.squeeze_()
    return v * 2


def _transposed_twice(x):
    x.transpose_(0, 2)
    x.transpose_(0, 2)
    return x * 2


def _detached_input_and_its_view(n):
    x = torch.linspace(-1, 1, 4 * n).view(2, 2, n).requires_grad_() * 1
    v = x[1:]
    x.detach_()
    return x, v


def _saved_then_squeezed(n):
    # `b`, which needs no grad, saved by `w * b` before the compiled call changes nothing of its layout
    w, b = torch.linspace(-1, 1, 4 * n).view(2, 2, n).requires_grad_(), torch.ones(2, 2, n)
    return w * b, b


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_an_in_place_no_op_moves_the_version_on_as_in_eager(backend):
    # a261.3:120. The graph dropped `x.squeeze_()` with no size-1 dim as changing nothing; eager moves the
    # version of `x`'s memory on, which rebuilds the history of a view taken before `x.detach_()` (no gradient
    # then reaches the leaf) and makes a backward that saved `x` refuse. Compiled, the leaf got a gradient.
    for f in (_detached_then_squeezed, compiler.compile(_detached_then_squeezed, backend=backend)):
        leaf = torch.linspace(-1, 1, 16).view(2, 2, 2, 2).requires_grad_()
        f(leaf.clone()).sum().backward()
        assert leaf.grad is None, f
    expected, actual = _detached_input_and_its_view(3), _detached_input_and_its_view(3)
    eager_out = _squeezed_beside_a_view(*expected)
    compiled_out = compiler.compile(_squeezed_beside_a_view, backend=backend)(*actual)
    assert (compiled_out.grad_fn is None) == (eager_out.grad_fn is None)
    assert type(actual[1].grad_fn) is type(expected[1].grad_fn), (actual[1].grad_fn, expected[1].grad_fn)
    for fn, mode in [(_squeezed_in_place, torch.enable_grad), (_transposed_twice, torch.no_grad)]:
        # (layout changes that cancel out, under no_grad, left AOT autograd no change to apply after the graph)
        for f in (fn, compiler.compile(fn, backend=backend)):
            product, b = _saved_then_squeezed(3)
            version = b._version
            with mode():
                f(b)
            assert b._version > version, f
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                product.sum().backward()


def _squeezed_then_saved(x, linear):
    x.squeeze_()  # no size-1 dim: eager moves the version on here, before `linear` saves `x`
    return linear(x)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_the_version_an_in_place_no_op_moves_on_is_moved_before_the_graph_saves_the_tensor(backend):
    # a272.0:103. Moved on after the graph, the version had changed under the tensor the graph saved for its
    # backward, which then refused ("modified by an inplace operation") where eager's runs.
    linear = torch.nn.Linear(2, 3)
    grads = []
    for f in (_squeezed_then_saved, compiler.compile(_squeezed_then_saved, backend=backend)):
        linear.zero_grad()
        f(torch.linspace(-1, 1, 8).view(2, 2, 2), linear).sum().backward()
        grads.append(linear.weight.grad.clone())
    torch.testing.assert_close(grads[1], grads[0])


def _assert_outcomes_as_eagers(fn, compiled, calls):
    """Per ``(make, n)`` of ``calls``, ``fn`` and ``compiled`` on ``make(n)``: the same RuntimeError, or close values."""
    for make, n in calls:
        outcomes = []
        for f in (fn, compiled):
            try:
                outcomes.append(f(make(n)).detach())
            except RuntimeError as err:
                outcomes.append(type(err))
        if isinstance(outcomes[0], type):
            assert outcomes[1] is outcomes[0], (make.__name__, n, outcomes)
        else:
            torch.testing.assert_close(outcomes[1], outcomes[0])


def _a_slice_of_a_result(n):
    return (torch.linspace(-1, 1, 6 * n).view(3, 2, n).requires_grad_() * 1)[0]


def _viewed_then_written_after_a_break(x):
    v = x.view(-1)
    print(end="")
    return v.mul_(2)


_VIEW_KINDS = [_a_slice_of_a_result, _a_piece_of_unbind, _a_view_made_under_no_grad, _a_result_of_autograd]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("first", _VIEW_KINDS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("then", _VIEW_KINDS, ids=lambda f: f.__name__)
def test_a_view_of_an_input_written_after_a_break_is_refused_as_eager_refuses_it(backend, first, then):
    # The view the graph returns takes the kind of the input it views (a piece of unbind: autograd refuses to
    # write it; a slice: allowed). A slice of the layout of the piece traced first passed its guards and was
    # refused too, where eager writes it.
    compiled = compiler.compile(_viewed_then_written_after_a_break, backend=backend)
    _assert_outcomes_as_eagers(_viewed_then_written_after_a_break, compiled, ((first, 3), (then, 3), (then, 4)))


def _pieces_kept_across_a_break(x):
    y = x * 2
    a, b = y.chunk(2)
    print(end="")
    return y, a, b.unbind(1)[1]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_the_pieces_of_a_split_returned_across_a_break_keep_eagers_values_and_gradients(backend):
    def run(f):
        leaf = torch.linspace(-1, 1, 8).view(4, 2).requires_grad_()
        outs = f(leaf.clone())
        weights = [torch.linspace(-2, 3, o.numel()).view(o.shape) for o in outs]
        sum((o * w).sum() for o, w in zip(outs, weights)).backward()
        return [o.detach() for o in outs], [o.stride() for o in outs], leaf.grad

    torch.testing.assert_close(
        run(compiler.compile(_pieces_kept_across_a_break, backend=backend)), run(_pieces_kept_across_a_break)
    )
    with torch.no_grad():
        x = torch.linspace(-1, 1, 8).view(4, 2)
        torch.testing.assert_close(
            compiler.compile(_pieces_kept_across_a_break, backend=backend)(x), _pieces_kept_across_a_break(x)
        )


def _piece_of_a_written_input(x):
    x.add_(1)
    return x.split(2)[0]


def _pieces_of_a_written_view(x):
    v = x[1:]
    v.mul_(2)
    return v.split(1)[0], x.chunk(2)[1]


def _last_piece_of_a_written_input(x):
    x.mul_(2)
    return x.unbind(0)[-1]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    ("fn", "leaf_shape", "step"),
    [
        (_piece_of_a_written_input, (4, 2), 1),
        (_pieces_of_a_written_view, (4, 2), 1),
        (_last_piece_of_a_written_input, (4, 2), 1),
        (_last_piece_of_a_written_input, (2, 1), 2),
        (_last_piece_of_a_written_input, (8, 2), 2),
    ],
)
def test_a_piece_of_an_input_the_graph_wrote_is_a_view_of_that_input(backend, fn, leaf_shape, step):
    # The backend returned such a piece as a view of its own buffer of the written value: a write into it then
    # missed the input, and autograd did not know the two shared elements. An input that is itself every other
    # row of a tensor the graph never sees (``step``) is the base of nothing the graph returns, yet holds the piece.
    def run(f):
        leaf = torch.linspace(-1, 1, math.prod(leaf_shape)).view(leaf_shape).requires_grad_()
        x = leaf.clone()[::step]
        outs = f(x)
        outs = outs if isinstance(outs, tuple) else (outs,)
        shares = [o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() for o in outs]
        sum((o * (i + 2)).sum() for i, o in enumerate(outs)).backward()
        with torch.no_grad():
            outs[0].mul_(0)  # reaches x, as in eager
        return shares, [o.detach() for o in outs], x.detach(), leaf.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))


def _second_row_of_a_written_input(x):
    x.mul_(2)
    return x.unbind(0)[1]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_piece_of_a_written_input_is_rebuilt_where_each_calls_input_starts(backend):
    # The piece is rebuilt as a view of the input at the offset the trace saw: an input of the same layout that
    # starts further into its tensor (``b[3:7]`` after ``b[1:5]``) got a view of other rows of ``b``, and
    # returned their values.
    compiled = compiler.compile(_second_row_of_a_written_input, backend=backend)

    def run(f, start, rows):
        b = torch.linspace(-1, 1, rows * 4).view(rows, 4).requires_grad_() * 1
        x = b[start : start + 4]
        piece = f(x)
        with torch.no_grad():
            piece.add_(100)  # reaches the row of ``b`` it views
        return piece.detach(), b.detach()

    for start, rows in ((1, 6), (3, 8), (0, 4)):
        torch.testing.assert_close(run(compiled, start, rows), run(_second_row_of_a_written_input, start, rows))


def _transposes_a_piece_of_unbind(x):
    piece = x.unbind(1)[0]
    piece.t_()  # a vector: the layout stays, but autograd refuses in-place ops on a piece of unbind first
    return None


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_layout_no_op_on_a_piece_of_unbind_raises_as_in_eager(backend):
    def run(f):
        x = torch.linspace(-1, 1, 2).view(2, 1).requires_grad_().clone()
        with pytest.raises(RuntimeError, match="inplace"):
            f(x)

    run(_transposes_a_piece_of_unbind)
    run(compiler.compile(_transposes_a_piece_of_unbind, backend=backend))


def _unbinds_a_written_view(x):
    x.copy_(-2.0)
    return x.unbind(1)[0]


def _splits_a_written_view(x):
    x.mul_(3)
    return x.split(1, 1)[1]


def _chunks_a_written_view(x):
    x.add_(1)
    return x.chunk(2, 2)[0]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_unbinds_a_written_view, _splits_a_written_view, _chunks_a_written_view])
def test_a_piece_of_a_written_input_view_stays_a_view_of_the_input(backend, fn):
    # The input is `.mT` of a tensor requiring grad; eager's piece is a view of that tensor's base, which the
    # input views too. AOT autograd returns the piece in memory of its own: a later write into the input did not
    # reach it. With symbolic sizes (the second call's) no layout is known to rebuild it, and the graph breaks.
    def run(f, n):
        leaf = torch.linspace(-1, 1, n * 2 * 4).view(n, 2, 4, 1).requires_grad_()
        x = leaf.clone().mT
        out = f(x)
        (out * torch.linspace(-2, 3, out.numel()).view(out.shape)).sum().backward()
        layout = (out.shape, out.stride(), out.storage_offset())
        shares = out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
        with torch.no_grad():
            x.add_(10)
        with pytest.raises(RuntimeError, match="inplace"):
            out.add_(1)
        return out.detach().clone(), layout, shares, leaf.grad

    compiled = compiler.compile(fn, backend=backend)
    for n in (2, 3, 5):
        torch.testing.assert_close(run(compiled, n), run(fn, n))


def _splits_a_view_beside_a_written_select(x):
    pair = torch.cat((x, x))
    expanded = pair.unsqueeze(0).expand(1, *pair.shape)
    last = expanded.select(1, -1)
    last.transpose_(0, 1)  # a graph break: a layout change of a view requiring grad
    return expanded.split(2, 3)[0]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_piece_rebuilt_after_a_break_gets_the_gradients_of_all_its_base(backend):
    # After the break the piece's base is no input, and an input viewing part of it (the select) is no base
    # to rebuild it from: gradients of the other half went nowhere (x's gradient 1 short of eager's).
    def run(f):
        leaf = torch.linspace(-1, 1, 4).view(1, 1, 2, 2).requires_grad_()
        out = f(leaf.clone())
        (out * torch.linspace(-2, 3, out.numel()).view(out.shape)).sum().backward()
        return out.detach(), out.stride(), leaf.grad

    torch.testing.assert_close(run(compiler.compile(_splits_a_view_beside_a_written_select, backend=backend)),
                               run(_splits_a_view_beside_a_written_select))  # fmt: skip


# ------------------------------------------------------------------ views whose elements share memory (expand)


def _expanded_across_a_break(x, weight):
    y = torch.nn.functional.linear(x, weight)
    z = y.unsqueeze(0).expand(3, *y.shape)
    print(end="")  # graph break: ``z`` leaves the first graph as an output, and enters the second as an input
    piece = z.select(1, -1)
    piece[0] += 1
    return piece


def _expanded_unbatched_convolution(x, weight):
    y = torch.nn.functional.conv1d(x, weight, padding=1)  # an unbatched input: eager's result is a view
    z = y.unsqueeze(0).expand(3, *y.shape)
    print(end="")
    z.select(1, 0)[-1].mul_(2)
    return z


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    ("fn", "weight_shape"), [(_expanded_across_a_break, (2, 2)), (_expanded_unbatched_convolution, (3, 4, 3))]
)
def test_a_write_into_a_piece_of_an_expanded_output_has_eagers_gradients(backend, fn, weight_shape):
    """An expand of an intermediate returned by a training graph is a view of that intermediate, as in eager: a
    backend's autograd function returned it as a tensor of its own, so a later in-place write into a piece of it
    was recorded into memory its elements share, and the backward raised "more than one element of the
    written-to tensor refers to a single memory location" (found by the fuzzer)."""

    def run(f):
        x = torch.linspace(-1, 1, 8).view(4, 2).requires_grad_()
        weight = torch.linspace(-2, 1, math.prod(weight_shape)).view(weight_shape).requires_grad_()
        out = f(x, weight)
        (out * torch.linspace(-1, 2, out.numel()).view(out.shape)).sum().backward()
        return out.detach(), out.stride(), out._base is not None, x.grad, weight.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))


def _writes_into_a_piece_of_an_expanded_input(z):
    piece = z.select(1, -1)
    piece[0] += 1
    return piece * 2


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_write_into_a_piece_of_an_expanded_input_has_eagers_values_and_gradients(backend):
    """A write into a piece of an input whose elements share memory: functionalized, it becomes a copy into the
    whole input, each of whose shared elements is written once per copy, all with the written value."""

    def run(f):
        y = torch.linspace(-1, 1, 8).view(4, 2).requires_grad_()
        z = (y * 1).unsqueeze(0).expand(3, 4, 2)
        out = f(z)
        (out * torch.linspace(-1, 2, out.numel()).view(out.shape)).sum().backward()
        return out.detach(), z.detach(), y.grad

    torch.testing.assert_close(
        run(compiler.compile(_writes_into_a_piece_of_an_expanded_input, backend=backend)),
        run(_writes_into_a_piece_of_an_expanded_input),
    )
