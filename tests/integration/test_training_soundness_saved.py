"""Training graphs against eager: what the backward reads of tensors written in place.

A graph writing into its inputs, the caller writing into an input or output after the call, the values the
backward saves or recomputes, and the version checks by which autograd refuses a saved tensor written since.

Each case runs the same function eagerly and through ``dynajit.compiler.compile`` on fresh copies of the same
leaves, runs a backward, and compares outputs, inputs after the call, gradients and exceptions.
"""

from __future__ import annotations

import pytest
import torch

import dynajit.capture
from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


# ------------------------------------------------------------------ what the backward saves and recomputes


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


def _sigmoid_through_transpose(x):
    v = x.mT
    v.sigmoid_()
    return v + v * 2


def _tanh_through_unsqueeze(x):
    v = x.unsqueeze(0)
    v.tanh_()
    return v * v


def _exp_through_flat_view(x):
    v = x.view(-1)
    v.exp_()
    return v.sum() * v


@pytest.mark.parametrize("fn", [_sigmoid_through_transpose, _tanh_through_unsqueeze, _exp_through_flat_view])
@pytest.mark.parametrize("dynamic", [None, True])
def test_a_dynamic_graph_saves_the_value_it_wrote_through_a_view_of_an_input_not_that_view(fn, dynamic):
    # The backward of sigmoid_ reads its result, the input's new value. Saved as a view of the input, the
    # copy of the new value into the input after the graph bumped the view's version, and the backward
    # raised "modified by an inplace operation" where eager's computes the gradient.
    def run(f, columns):
        x_leaf = torch.linspace(-1, 1, columns).view(1, columns).requires_grad_()
        x = x_leaf.clone()
        out = f(x)
        out.backward(torch.linspace(0.5, 1.5, out.numel()).view(out.shape))
        return out.detach(), x.detach(), x_leaf.grad

    compiled = compiler.compile(fn, backend="inductor", dynamic=dynamic)
    for columns in (1, 3, 2):
        for expected, actual in zip(run(fn, columns), run(compiled, columns)):
            torch.testing.assert_close(actual, expected)


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


# ------------------------------------------------------------------ the versions of saved tensors


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
