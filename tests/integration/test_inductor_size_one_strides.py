"""A size-1 dim's stride, which addresses nothing, still chooses a convolution's output layout: the ops whose
eager kernels lay a contiguous result out as ``torch.empty`` does (batch norm's, when the input suggests the
contiguous format) must give their readers the same strides. And
eager's overlap checks compare two views of one memory stride by stride, size-1 dims included.

Each case runs eagerly and compiled with the default backend on the same input, whose size-1 dim has a
stride other than the one ``torch.empty`` gives, and compares values and every stride.
"""

from __future__ import annotations

import logging

import pytest
import torch

from dynajit import compiler


@pytest.fixture(autouse=True)
def _fresh():
    compiler.reset()
    yield
    compiler.reset()


torch.manual_seed(0)
_CONV = torch.nn.Conv1d(1, 3, 3, padding=1).requires_grad_(False)
_NORMS = {
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, x.shape[-1:]),
    "group_norm": lambda x: torch.nn.functional.group_norm(x, 1),
    "log_softmax": lambda x: x.log_softmax(-1),
    # a129:603: training-mode batch norm, whose eager kernel lays its result out in the input's suggested format
    "batch_norm": lambda x: torch.nn.functional.batch_norm(x, None, None, training=True),
}


@pytest.mark.parametrize("norm", list(_NORMS))
@pytest.mark.parametrize("dynamic", [False, None])
def test_a_convolution_of_a_normalised_size_one_channel_has_eagers_layout(norm, dynamic):
    # The input's channel dim has one element and stride 1; eager's kernel returns the strides empty() gives,
    # and the convolution reading that result lays its own output out as contiguous (not channels-last).
    def fn(x):
        return _CONV(_NORMS[norm](x))

    compiled = compiler.compile(fn, dynamic=dynamic)
    for batch, width in ((2, 2), (3, 5), (4, 5)):
        x = torch.randn(batch, width, 1).mT
        expected, actual = fn(x), compiled(x)
        assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
        torch.testing.assert_close(actual, expected)


def test_a_result_without_a_size_one_dim_keeps_its_layout_and_its_graph():
    # The layout is looked at only where a size-1 dim makes it ambiguous: a transposed input's normalisation
    # is left as the decomposition lays it out, which is eager's.
    def fn(x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:]) * 2

    compiled = compiler.compile(fn)
    x = torch.randn(5, 4).t()
    expected, actual = fn(x), compiled(x)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "op",
    [lambda x: x // 2.5, lambda x: torch.div(x, 2.5, rounding_mode="floor"), lambda x: x * 2.5],
    ids=["floordiv", "div_floor", "mul"],
)
def test_an_expand_of_a_floor_division_is_a_view_of_it_with_eagers_strides(op):
    # A floor division's fake result is laid out again as eager's kernel lays it, in a new fake storage; the
    # expand reading it kept a view of the old one, so the output became a dense copy (stride 1 where eager's
    # expand has 0), and the size-1 dims took the input's strides where eager's are empty()'s.
    def fn(x, like):
        return op(x).expand_as(like)

    x, like = torch.randn(2, 1, 1)[::2], torch.randn(1, 2, 1)
    expected, actual = fn(x, like), compiler.compile(fn)(x, like)
    assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
    torch.testing.assert_close(actual, expected)


# Inputs with a size-1 dim whose stride is not the one ``torch.empty`` gives it; ``(n, 1)`` of ``randn(1, n).t()``
# has a stride there that changes with ``n``.
_SIZE_ONE_INPUTS = {
    "transposed_last": lambda n: torch.randn(n, 1, 2).mT,
    "transposed_row": lambda n: torch.randn(1, n).t(),
}
_VIEWS = {
    "view": lambda x: x.view(x.shape),
    "slice": lambda x: x[:],
    "unsqueeze_select": lambda x: x.unsqueeze(0)[0],
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("view", list(_VIEWS))
@pytest.mark.parametrize("make", list(_SIZE_ONE_INPUTS))
def test_a_view_of_an_input_written_through_it_keeps_the_inputs_strides_across_a_break(backend, dynamic, view, make):
    # a78-1:3788. The graph writes the input through the view and returns the view; AOT autograd rebuilds it from
    # the input with the strides the compiled graph returns. A dynamic graph's kernel gave the size-1 dim the
    # fake kernel's stride where eager's view keeps the input's, so Python's `x.mul_(v)` after the break raised
    # (a partial overlap).
    def fn(x):
        v = _VIEWS[view](x)
        torch.add(v, 1, out=v)
        print(end="")  # a graph break: `v` crosses it as the first graph's output
        x.mul_(v)
        return v

    compiled = compiler.compile(fn, backend=backend, dynamic=dynamic)
    for n in (2, 3, 4, 3):
        x = _SIZE_ONE_INPUTS[make](n)
        y = x.clone()
        expected, actual = fn(x), compiled(y)
        assert actual.stride() == expected.stride(), (n, actual.stride(), expected.stride())
        assert actual.untyped_storage().data_ptr() == y.untyped_storage().data_ptr()
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(y, x)


def _squeezed_then_viewed(x, other):
    x.squeeze_()
    return x.unsqueeze(0).expand(1, *x.shape), other * 2


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("shape", [(0, 1, 0), (2, 1, 3)])
def test_a_view_of_an_input_whose_layout_the_graph_changes_is_made_from_its_new_layout(backend, grad, shape):
    # a79-0:1360. The graph squeezes the input in place and returns a view of it; the second call's other
    # argument makes the graph dynamic. Its output was taken for a view of new data written into the input and
    # made by the view ops replayed on the input as it came in, whose layout AOT autograd changes only after the
    # graph: `unsqueeze` of the unsqueezed input, then an `expand` to one dim fewer, raised (an inference graph's).
    compiled = compiler.compile(_squeezed_then_viewed, backend=backend)
    for n in (0, 2, 3):
        x = torch.randint(-4, 5, shape)
        y = x.clone()
        other = torch.randn(1, n, n)
        with torch.set_grad_enabled(grad):
            expected, actual = _squeezed_then_viewed(x, other), compiled(y, other)
        for got, want in zip(actual, expected):
            assert got.shape == want.shape and got.stride() == want.stride()
            torch.testing.assert_close(got, want)
        assert y.shape == x.shape and y.stride() == x.stride()


def _one_channel(layout, height, width):
    if layout == "contiguous":
        return torch.randn(2, 1, height, width)
    if layout == "channels_last":  # the channel dim's stride is 1, as channels-last gives it
        return torch.randn(2, height, width, 1).permute(0, 3, 1, 2)
    # a stride no product of sizes gives: a symbol of the fake's, so its entry must not recompile on each call
    return torch.empty_strided((2, 1, height, width), (height * width, 100, width, 1)).normal_()


_LAYOUTS = ("contiguous", "channels_last", "odd")


@pytest.mark.parametrize("first", _LAYOUTS)
def test_a_one_channel_input_in_another_layout_gets_eagers_output_strides(first):
    # (Found beside fuzz a288.17:187.) The compiled entry for a one-channel input in one layout must not answer for
    # another: with dynamic sizes the guard asks is_contiguous(), which the channel dim's stride does not change,
    # but eager's convolution lays its output out by that stride. Each layout is compiled once, whatever its sizes.
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(1, 5, 1, bias=False)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = compiler.compile(conv, dynamic=True, backend=backend)
    default = compiler.compile(conv, dynamic=True)
    order = [first, *(layout for layout in _LAYOUTS if layout != first)]
    for height, width in ((3, 3), (4, 5), (6, 2)):
        for layout in order:
            x = _one_channel(layout, height, width)
            expected = conv(x)
            for actual in (compiled(x), default(x)):
                assert actual.stride() == expected.stride(), (layout, actual.stride(), expected.stride())
                torch.testing.assert_close(actual, expected)
    assert len(graphs) <= len(_LAYOUTS)  # an entry per layout at most, whatever the sizes


_OF_A_SLICE = {
    "clone": lambda x: x.clone(),
    "scaled": lambda x: x * 2,
    "permuted": lambda x: x.permute(2, 0, 1) * 1,
    "transposed view": lambda x: x.transpose(0, 1),
    "sliced view": lambda x: x[:, 1:],
    "scaled by its stride": lambda x: x * x.stride(0),
}


@pytest.mark.parametrize("op", list(_OF_A_SLICE))
def test_a_batch_of_one_cut_from_a_longer_sequence_keeps_its_own_batch_stride(op, caplog):
    # The last three steps of a sequence of one: the batch dim's stride is the length before the cut, which no
    # product of the sizes gives. A clone keeps it, as eager's does, for every length from one graph, whose
    # kernels read that stride from the input (not aten ops in their place).
    fn = _OF_A_SLICE[op]
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    counted, default = compiler.compile(fn, dynamic=True, backend=backend), compiler.compile(fn, dynamic=True)
    with caplog.at_level(logging.WARNING, logger="dynajit.inductor_lite"):
        for length in (5, 6, 9):
            x = torch.randn(1, length, 4)[:, -3:]
            expected = fn(x)
            for actual in (counted(x), default(x)):
                assert actual.stride() == expected.stride(), (actual.stride(), expected.stride())
                torch.testing.assert_close(actual, expected)
    assert len(graphs) == 1
    assert not [r.getMessage() for r in caplog.records if "through aten" in r.getMessage()]
