"""Training graphs against eager: gradients, and which in-place ops autograd allows, around graphs that write
into their inputs, change their layouts, save them, or return views.

Each case runs the same function eagerly and through ``dynajit.compiler.compile`` on fresh copies of the same
leaves, runs a backward, and compares outputs, inputs after the call, gradients and exceptions.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import dynajit.capture
from dynajit import compiler


@pytest.fixture(autouse=True)
def _fresh():
    """Cases share code objects (one function per parametrisation): each starts with no compiled code."""
    compiler.reset()
    yield
    compiler.reset()


def _scaled_in_place(x, w):
    x.mul_(w)
    return x * 1


def _written_after_a_view(x, w):
    y = x * 1
    x.mul_(y)
    return y.select(0, -1) * w


def _doubled(x, w):
    x.mul_(2)
    return x.sin() * w


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_scaled_in_place, _written_after_a_view, _doubled])
@pytest.mark.parametrize("x_requires_grad", [True, False])
def test_the_backward_of_a_graph_writing_into_an_input_sees_the_value_before_the_write(backend, fn, x_requires_grad):
    # The backward needs x before the write; a partitioner that saves the input itself and recomputes the
    # copy from it reads the written value, and autograd refuses (or would compute with the wrong value).
    def run(f):
        torch.manual_seed(0)
        x_leaf, w = torch.randn(3, 4, requires_grad=x_requires_grad), torch.randn(4, requires_grad=True)
        x = x_leaf.clone() if x_requires_grad else x_leaf
        out = f(x, w)
        out.backward(torch.linspace(-1, 1, out.numel()).view(out.shape))
        return out.detach(), x.detach(), w.grad, x_leaf.grad if x_requires_grad else None

    expected = run(fn)
    actual = run(compiler.compile(fn, backend=backend))
    for e, a in zip(expected, actual):
        assert (e is None) == (a is None)
        if e is not None:
            torch.testing.assert_close(a, e)


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


@pytest.mark.parametrize("strided", [False, True])
def test_a_saved_input_copied_for_the_backward_is_read_with_the_copys_strides(strided):
    # The backward recomputes a clone of the input; the forward saves that clone, which is dense where the input
    # has gaps, and the backward must read it as such (it read it with the input's strides: wrong gradients).
    def fn(x):
        return torch.pow(x.softmax(0), 2)

    def run(f):
        leaf = torch.linspace(-1, 1, 4).view(4, 1, 1).requires_grad_()
        x = leaf.clone()[::2] if strided else leaf.clone()[:2]
        (f(x) * torch.tensor([1.0, -2.0]).view(2, 1, 1)).sum().backward()
        return leaf.grad

    torch.testing.assert_close(run(compiler.compile(fn)), run(fn))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_value_the_backward_recomputes_from_an_input_written_later_is_saved_before_the_write(backend):
    # LayerNorm's backward needs -x; recomputed from the saved x, it would read x after the write (autograd then
    # refuses the backward, as x's version moved on).
    norm = torch.nn.LayerNorm(2)

    def fn(x):
        y = norm(-x)
        x.split(2, -1)[0].add_(-1)
        return y

    def run(f):
        norm.zero_grad()
        x = torch.linspace(-1, 1, 2).view(1, 1, 2)
        out = f(x)
        (out * torch.tensor([1.0, -3.0])).sum().backward()
        return out.detach(), x, norm.weight.grad, norm.bias.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))


def test_an_input_the_backward_recomputes_from_is_saved_as_eager_saved_it_when_the_caller_writes_it_later():
    # The min-cut partitioner would save the bool input (one byte per element) and recompute `x * 3` from it in
    # the backward, where eager saves the int64 product: the caller's in-place op on x after the call would then
    # make the backward raise where eager's computes.
    emb = torch.nn.Embedding(10, 3)

    def fn(x):
        return emb(x * 3)

    def run(f):
        emb.zero_grad()
        x = torch.tensor([True, False, True, True, False, False])
        out = f(x)
        x.logical_not_()
        (out * torch.arange(18.0).view(6, 3)).sum().backward()
        return out.detach(), x, emb.weight.grad

    torch.testing.assert_close(run(compiler.compile(fn)), run(fn))


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


@pytest.mark.parametrize("dynamic", [False, None])
def test_a_module_reading_a_strided_input_the_graph_wrote_gets_eagers_gradients(dynamic):
    # BatchNorm's backward reads the written input, which the forward returns as a buffer: the buffer kept the
    # values but not the input's strides, which the backward read it through (wrong gradients, or memory it
    # never wrote).
    bn = torch.nn.BatchNorm1d(4)

    def fn(x):
        x.mul_(2)
        return bn(x)

    def run(f, n):
        bn.zero_grad()
        g = torch.Generator().manual_seed(n)
        x = torch.randn((2 * n, 4, 1), generator=g)[::2]
        out = f(x)
        (out * torch.randn(out.shape, generator=g)).sum().backward()
        return out.detach(), x, bn.weight.grad, bn.bias.grad

    compiled = compiler.compile(fn, dynamic=dynamic)
    for n in (2, 3, 5):
        torch.testing.assert_close(run(compiled, n), run(fn, n))


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


def _logs_a_statistic_with_an_infinite_derivative(x):
    y = torch.sqrt(x)  # at x < 0 its value is NaN and so is its derivative
    z = torch.nan_to_num(y) * 3
    print(end="")  # a graph break: z leaves the first graph, read only by float() below
    return x * 2, float(z.sum())


def _weighted_by_zero(x):
    return torch.sqrt(x).sum() * 2, x * 3


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("dynamic", [False, None])
def test_an_output_the_loss_never_reaches_puts_no_nan_into_the_gradients(backend, dynamic):
    fn = _logs_a_statistic_with_an_infinite_derivative

    # Autograd passes zeros for a graph output the loss did not reach; multiplied by sqrt's infinite derivative
    # they made NaN gradients where eager, which never differentiates through that output, has none.
    def run(f, values):
        leaf = torch.tensor(values).requires_grad_()
        out, _ = f(leaf.clone())
        out.sum().backward()
        return out.detach(), leaf.grad

    compiled = compiler.compile(fn, backend=backend, dynamic=dynamic)
    for values in ([-1.0, 1.0, 4.0], [-1.0, 0.0, 2.0, 3.0]):
        torch.testing.assert_close(run(compiled, values), run(fn, values))


def _fills_a_root_a_closure_holds(x):
    # (the fuzzer's program f33-0:558) the root lives in a cell, so it is a graph output the loss never reaches;
    # its gradient after ``fill_`` is ``zeros_like`` of the tangent, and was multiplied by sqrt's NaN derivative
    scaled = x.clone() * 1
    root = torch.nan_to_num(x.sqrt())

    def fill():
        root.fill_(1)

    fill()
    return scaled


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("dynamic", [False, None])
def test_an_unreached_output_filled_in_place_puts_no_nan_into_the_gradients(backend, dynamic):
    def run(f, values):
        leaf = torch.tensor(values).requires_grad_()
        out = f(leaf.clone())
        (out * torch.arange(1.0, len(values) + 1)).sum().backward()
        return out.detach(), leaf.grad

    compiled = compiler.compile(_fills_a_root_a_closure_holds, backend=backend, dynamic=dynamic)
    for values in ([1.5, -0.25], [-1.0, 0.0, 4.0]):
        torch.testing.assert_close(run(compiled, values), run(_fills_a_root_a_closure_holds, values))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_gradient_that_is_truly_zero_stays_a_zero_gradient(backend):
    # The loss reaches every output, with zero weights: the inputs' gradients are zeros (not None), as in eager.
    def run(f):
        leaf = torch.tensor([1.0, 4.0]).requires_grad_()
        total, scaled = f(leaf.clone())
        (total * 0 + scaled.sum() * 0).backward()
        return leaf.grad

    expected = run(_weighted_by_zero)
    actual = run(compiler.compile(_weighted_by_zero, backend=backend))
    assert actual is not None
    torch.testing.assert_close(actual, expected)


def _variance_selected_by_a_mask(x):
    v = x.var(1)  # over one element: NaN, and so is its derivative
    return v[v > 0] * 1  # the mask selects nothing (a break): the loss reaches v through an empty selection


def _empty_slice_of_a_nan_root(x):
    return torch.nan_to_num(x.sqrt())[2:2], x * 2  # the loss reaches the root through an empty output


def _reached_and_unreached_zeros(x):
    # The caller's loss leaves out the middle output, whose derivative is infinite at x == 4.
    return torch.nan_to_num(x.sqrt())[:0], torch.nan_to_num((x - 4).sqrt()), x + 1


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_variance_selected_by_a_mask, _empty_slice_of_a_nan_root, _reached_and_unreached_zeros])
def test_a_zero_gradient_the_loss_reaches_meets_the_infinite_derivative_as_in_eager(backend, fn):
    # A gradient the loss reached can be all zeros: eager multiplies it by the derivatives behind it, and 0 * inf
    # is NaN there. Only the outputs the loss never reached are skipped, as autograd skips them.
    def run(f):
        leaf = torch.tensor([[-1.0], [4.0], [9.0]]).requires_grad_()
        outs = f(leaf.clone())
        outs = outs if isinstance(outs, tuple) else (outs,)
        reached = [o for i, o in enumerate(outs) if i != 1 or len(outs) < 3]
        sum(o.sum() * (i + 2) for i, o in enumerate(reached)).backward()
        return [o.detach() for o in outs], leaf.grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var() over one element warns about its degrees of freedom
        expected, actual = run(fn), run(compiler.compile(fn, backend=backend))
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert torch.isnan(expected[1][0])  # the case the test is about: eager's own 0 * inf
    if fn is _reached_and_unreached_zeros:
        assert not torch.isnan(expected[1][1])  # (x - 4).sqrt()'s infinite derivative is never reached


def _piece_of_a_written_input(x):
    x.add_(1)
    return x.split(2)[0]


def _pieces_of_a_written_view(x):
    v = x[1:]
    v.mul_(2)
    return v.split(1)[0], x.chunk(2)[1]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_piece_of_a_written_input, _pieces_of_a_written_view])
def test_a_piece_of_an_input_the_graph_wrote_is_a_view_of_that_input(backend, fn):
    # The backend returned such a piece as a view of its own buffer of the written value: a write into it then
    # missed the input, and autograd did not know the two shared elements.
    def run(f):
        leaf = torch.linspace(-1, 1, 8).view(4, 2).requires_grad_()
        x = leaf.clone()
        outs = f(x)
        outs = outs if isinstance(outs, tuple) else (outs,)
        shares = [o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr() for o in outs]
        sum((o * (i + 2)).sum() for i, o in enumerate(outs)).backward()
        with torch.no_grad():
            outs[0].mul_(0)  # reaches x, as in eager
        return shares, [o.detach() for o in outs], x.detach(), leaf.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_element_read_after_the_graph_puts_no_nan_into_the_gradients_of_what_it_was_read_from(backend):
    # select's backward is a where() between the gradient and a tensor of zeros: with a zero gradient, both
    # branches are zeros, and the sqrt's infinite derivative behind them must not be reached.
    lin = torch.nn.Linear(3, 8).requires_grad_(False)
    torch.nn.init.constant_(lin.bias, -1.0)  # negative outputs: sqrt is NaN there, and so is its derivative

    def fn(x, y):
        z = torch.nan_to_num(lin(x).sqrt())
        out = torch.nn.functional.linear(y, y.new_ones(2, y.shape[-1]))
        first = z.flatten()[0].item()  # a graph break: z leaves the graph, read by item() alone
        return out, first

    def run(f):
        x_leaf, y_leaf = torch.zeros(1, 3).requires_grad_(), torch.ones(1, 2, 3).requires_grad_()
        out, _ = f(x_leaf.clone(), y_leaf.clone())
        out.sum().backward()
        return x_leaf.grad, y_leaf.grad

    (x_grad, y_grad), (x_expected, y_expected) = run(compiler.compile(fn, backend=backend)), run(fn)
    assert x_expected is None and (x_grad is None or not x_grad.any())  # a compiled graph's unreached input: 0
    torch.testing.assert_close(y_grad, y_expected)


def _clamped_statistic(x, lin):
    y = lin(x)
    z = torch.nan_to_num(y.sqrt()).clamp(min=-0.5)
    peak = z.max().item()  # a graph break: z leaves the graph, read by item() alone
    return y, peak


def _rectified_in_place_statistic(x, lin):
    z = torch.nan_to_num(x.sqrt())
    torch.relu_(z)
    last = x[..., -1]
    last.mul_(1)
    if z.float().mean() < 0.5:  # a data-dependent break: z is an output, read after it but not returned
        unused = z - 2.0  # noqa: F841
    return last


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_clamped_statistic, _rectified_in_place_statistic])
def test_a_statistic_read_through_clamp_or_relu_puts_no_nan_into_the_gradients(backend, fn):
    # clamp's and relu's backward is a where() between the gradient and a scalar zero: with the unreached
    # output's zero gradient both branches are zeros, and sqrt's infinite derivative behind them is not reached.
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 5)

    def run(f):
        leaf = torch.tensor([[-1.0, 0.0, 0.25, 4.0]]).requires_grad_()
        lin.zero_grad()
        out = f(leaf.clone(), lin)
        out = out[0] if isinstance(out, tuple) else out
        (out * torch.arange(5.0)).sum().backward()
        return out.detach(), leaf.grad, lin.weight.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn), equal_nan=False)


_PROJECTION = torch.linspace(-1, 1, 6).view(3, 2).requires_grad_()


def _input_written_after_its_statistic(x):
    mean = x.mean(1, keepdim=True)
    peak = (x @ _PROJECTION).max().item()  # a graph break: the matmul saved x, for the projection's gradient
    torch.nn.functional.relu(x, inplace=True)
    return mean, peak


def _output_written_after_its_statistic(x):
    y = x * 2
    peak = (y @ _PROJECTION).max().item()  # the matmul saved y, which the graph returns
    rest = y % 3
    y.add_(y)
    return rest, peak


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_input_written_after_its_statistic, _output_written_after_its_statistic])
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_tensor_saved_for_an_unreached_gradient_may_be_written_before_the_backward(backend, fn, dynamic):
    # Eager checks a saved tensor's version only in the nodes the backward reaches: the matmul's saved input,
    # written in place afterwards, is never looked at. The compiled graph's single node checked every tensor
    # it saved.
    def run(f):
        leaf = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]).requires_grad_()
        _PROJECTION.grad = None
        out, _ = f(leaf.clone())
        (out * torch.arange(out.numel()).view(out.shape)).sum().backward()
        # The projection is an input the compiled graph does not reach: zeros where eager leaves None
        unreached = _PROJECTION.grad is None or not _PROJECTION.grad.any()
        return out.detach(), leaf.grad, unreached

    # With symbolic sizes, the zeros standing for the unreached gradient are zeros_like of a computation from
    # the saved tensor: that reads its layout, not its values, and is no reason to check its version.
    torch.testing.assert_close(run(compiler.compile(fn, backend=backend, dynamic=dynamic)), run(fn))


def _statistics(x):
    return x.mean(1, keepdim=True), (x @ _PROJECTION).max()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_tensor_saved_for_a_reached_gradient_and_then_written_raises_as_in_eager(backend):
    def run(f):
        leaf = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]).requires_grad_()
        x = leaf.clone()
        mean, peak = f(x)
        x.mul_(2)  # the matmul saved x: its backward must refuse it now
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (mean.sum() + peak).backward()

    run(_statistics)
    run(compiler.compile(_statistics, backend=backend))


def _copies_a_saved_tensor_into_itself(x):
    y = x * 2
    z = y.sin()  # saves y
    y.copy_(y)
    return z


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
def test_a_copy_into_itself_of_a_saved_tensor_raises_at_backward_as_in_eager(backend):
    # Eager's copy_ of a tensor into itself changes no value but bumps the version sin's backward checks. The
    # graph recorded nothing for the copy and its backward ran.
    for f in (
        _copies_a_saved_tensor_into_itself,
        compiler.compile(_copies_a_saved_tensor_into_itself, backend=backend),
    ):
        out = f(torch.tensor([0.5, -1.0, 2.0]).requires_grad_())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()


def _relu_and_double(x):
    return x.relu(), x * 2


def _exp_in_place_viewed(x):
    y = x * 1
    y.exp_()  # saves its result
    return y[1:], x.sin()


_SAVED_OUTPUT_CASES = {
    # (function, which output the caller writes, which outputs the backward starts from, eager raises)
    "relu_written_backward_through_it": (_relu_and_double, 0, (0, 1), True),
    "relu_written_backward_from_the_other": (_relu_and_double, 0, (1,), False),
    "double_written": (_relu_and_double, 1, (0, 1), False),
    "exp_view_written": (_exp_in_place_viewed, 0, (0,), True),
    "exp_view_written_backward_from_sin": (_exp_in_place_viewed, 0, (1,), False),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("case", list(_SAVED_OUTPUT_CASES))
def test_an_output_eager_saved_and_the_caller_wrote_is_refused_by_the_backward_as_in_eager(backend, case):
    # relu and exp save their result; the compiled graph's backward saved other tensors (a mask), so a write into
    # the returned result after the call went unnoticed and the backward computed where eager raises.
    fn, written, starts, raises = _SAVED_OUTPUT_CASES[case]

    def run(f):
        leaf = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]).requires_grad_()
        outs = f(leaf.clone())
        outs[written].add_(1)
        loss = sum(outs[k].sum() for k in starts)
        if raises:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                loss.backward()
            return None
        loss.backward()
        return leaf.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))


def _three_statistics(x, y):
    return x.mean(1, keepdim=True), (x @ _PROJECTION).max(), (y @ _PROJECTION).max()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("written", [0, 1])
def test_each_tensor_saved_for_some_gradients_only_is_checked_against_its_own_version(backend, written):
    # x and y are each saved for one statistic's gradient: their versions at the forward are recorded together,
    # and the one written afterwards (whichever it is) is refused by the backward that reads it.
    def run(f):
        leaves = [torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]).requires_grad_() for _ in range(2)]
        inputs = [leaf.clone() for leaf in leaves]
        inputs[1].add_(0)  # (the two start at different versions)
        mean, first, second = f(*inputs)
        inputs[written].mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (mean.sum() + first + second).backward()
        inputs = [leaf.clone() for leaf in leaves]
        inputs[1].add_(0)
        mean, first, second = f(*inputs)
        (mean.sum() + first + second).backward()  # unwritten: no error
        return [leaf.grad for leaf in leaves]

    torch.testing.assert_close(run(compiler.compile(_three_statistics, backend=backend)), run(_three_statistics))


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_saved_tensor_hooks_pack_and_unpack_a_tensor_saved_for_some_gradients_only(backend):
    # Such a tensor is kept out of save_for_backward: the active hooks still pack it at the forward and unpack
    # it for the backward that reads it, and the gradients are eager's.
    def run(f):
        calls = []

        def pack(t):
            calls.append("pack")
            return t.clone()  # what an offloading hook does: the saved tensor is a copy

        def unpack(t):
            calls.append("unpack")
            return t

        leaf = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]).requires_grad_()
        _PROJECTION.grad = None
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            mean, peak = f(leaf.clone())
        (mean.sum() + peak).backward()
        return calls, leaf.grad, _PROJECTION.grad

    calls, *grads = run(compiler.compile(_statistics, backend=backend))
    _, *expected = run(_statistics)
    torch.testing.assert_close(grads, expected)
    assert calls.count("pack") == calls.count("unpack") >= 1


def _recomputed_from_an_output(x, embedding):
    looked_up = embedding(x.abs() % 10)
    alias = looked_up
    rooted = torch.nan_to_num(looked_up.sqrt())
    alias.unsqueeze_(0)  # a graph break (a layout change of a tensor requiring grad): looked_up is an output
    return rooted


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_output_changed_in_place_after_the_graph_is_not_what_its_backward_recomputes_from(backend):
    # The min-cut partitioner saved the embedding's result, an output, to recompute sqrt from it where eager
    # saves sqrt's result: the caller's unsqueeze_ of the output then made the backward raise.
    torch.manual_seed(0)
    embedding = torch.nn.Embedding(10, 8)

    def run(f):
        embedding.zero_grad()
        out = f(torch.tensor([3, 7]), embedding)
        (out * torch.arange(out.numel()).view(out.shape)).sum().backward()
        return out.detach(), embedding.weight.grad

    torch.testing.assert_close(
        run(compiler.compile(_recomputed_from_an_output, backend=backend)),
        run(_recomputed_from_an_output),
        equal_nan=True,
    )


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


def _written_statistic(x):
    y = torch.matmul(x, x)
    root = torch.nan_to_num(y.sqrt())
    root[..., 0] += 1  # functionalized into copy and select_scatter in the backward
    print(end="")  # a graph break: root, read after it, is an output the loss never reaches
    return y, root.shape[2]


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_unreached_output_written_through_an_index_puts_no_nan_into_the_gradients(backend):
    # The zero gradient of `root` passes through the backward of its in-place write (a copy into a fresh
    # tensor, a select_scatter) before sqrt's infinite derivative: it must stay a structural zero there.
    def run(f):
        leaf = torch.tensor([[[0.0, -1.0], [2.0, 0.5]], [[1.0, 0.0], [0.0, 1.0]]]).requires_grad_()
        out, _ = f(leaf.clone())
        (out * torch.arange(8.0).view(2, 2, 2)).sum().backward()
        return out.detach(), leaf.grad

    torch.testing.assert_close(run(compiler.compile(_written_statistic, backend=backend)), run(_written_statistic))


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


def _floor_and_double(x):
    return x // 3, x * 2


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_op_without_a_derivative_raises_only_in_a_backward_that_reaches_it(backend):
    # Eager's `x // 3` of a tensor requiring grad has a backward that raises when reached; compiled, the op
    # runs in Python (a graph break), so the graph's backward differentiates only what it can.
    compiled = compiler.compile(_floor_and_double, backend=backend)
    results = []
    for f in (_floor_and_double, compiled):
        x = torch.linspace(-2, 2, 5, requires_grad=True)
        floored, doubled = f(x)
        doubled.sum().backward()
        with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
            floored.sum().backward()
        results.append((floored.detach(), doubled.detach(), x.grad))
    torch.testing.assert_close(results[1], results[0])


def _written_through_out(x):
    v = x // 3
    torch.add(v, x, out=v)
    return v


def test_an_out_argument_with_an_input_requiring_grad_raises_as_in_eager():
    x = torch.linspace(-2, 2, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match="arguments don't support automatic differentiation") as eager:
        _written_through_out(x)
    with pytest.raises(RuntimeError) as compiled:
        compiler.compile(_written_through_out)(x)
    assert str(compiled.value) == str(eager.value)


def _squared_max_of_log1p(x):
    return torch.log1p(x).max() ** 2


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_nan_gradient_of_a_whole_max_reaches_only_the_maxima_as_in_eager(backend):
    # log1p below -1 is NaN, so max() is NaN and so is its gradient. Eager's CPU formula puts it on the NaN
    # elements only (zeros.masked_fill_); traced on fake tensors the formula multiplies the mask by it: NaN
    # everywhere.
    grads = []
    for f in (_squared_max_of_log1p, compiler.compile(_squared_max_of_log1p, backend=backend)):
        x = torch.tensor([-1.5, 0.3, -2.0, 0.7], requires_grad=True)
        f(x).backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0], equal_nan=True)
    assert grads[0][1] == 0


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_unused_softmax_of_bools_raises_as_in_eager(backend):
    def fn(x):
        torch.softmax(x == x, dim=0)
        return x * 2

    x = torch.ones(3)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        fn(x)
    with pytest.raises(NotImplementedError, match="not implemented for 'Bool'"):
        compiler.compile(fn, backend=backend)(x)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("causal", [False, True])
def test_an_attention_whose_result_is_unused_is_left_out_of_a_training_graph(backend, causal):
    # AOT autograd keeps the unused attention (its schema has a dropout), and the default partitioner took its
    # tuple of results for a tensor: the compile failed and the frame ran eagerly.
    def fn(x):
        torch.nn.functional.scaled_dot_product_attention(x, x * 0.5, x, is_causal=causal)
        return x * 2

    def run(f):
        leaf = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0)).requires_grad_()
        out = f(leaf.clone())
        out.sum().backward()
        return out.detach(), leaf.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))  # (strict: no fallback)


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


def _scales_an_input_in_place(x):
    x.mul_(2)
    return x.sin() * x


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_in_place_op_on_a_dynamic_input_autograd_made_is_compiled_with_eagers_gradients(backend):
    # A symbolic input that autograd made (a resumed frame's activation) was faked as a leaf, which refuses
    # in-place ops: the write broke the graph.
    def run(f, n):
        leaf = torch.linspace(-1, 1, n * 3).view(n, 3).requires_grad_()
        x = leaf.clone().t()
        out = f(x)
        (out * torch.linspace(-2, 3, out.numel()).view(out.shape)).sum().backward()
        return out.detach(), x.detach(), x.stride(), leaf.grad

    compiled = compiler.compile(_scales_an_input_in_place, backend=backend, dynamic=True)
    for n in (2, 3, 5):
        torch.testing.assert_close(run(compiled, n), run(_scales_an_input_in_place, n))
    x = torch.randn(4, 3, requires_grad=True).clone().t()
    dynajit.capture.mark_dynamic(x, 1)
    assert compiler.explain(_scales_an_input_in_place, backend=backend)(x).graph_break_count == 0


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
