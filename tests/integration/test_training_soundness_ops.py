"""Training graphs against eager: ops autograd or eager refuses, and ops whose result is unused.

An op without a derivative, an ``out=`` argument with an input requiring grad, an unused softmax of bools,
an unused attention, ``requires_grad_``, ``detach_`` and ``retain_grad`` inside the compiled function.

Each case runs the same function eagerly and through ``dynajit.compiler.compile`` on fresh copies of the same
leaves, runs a backward, and compares outputs, inputs after the call, gradients and exceptions.
"""

from __future__ import annotations

import pytest
import torch

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


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


def _flag_on_the_argument(x):
    x.requires_grad_()
    return x * 2


def _flag_through_the_class(x):
    torch.Tensor.requires_grad_(x)
    return x.sin()


def _flag_on_a_computed_value(x):
    y = (x + 1).requires_grad_()
    return y * 3


def _gradient_of_a_detached_copy(x):  # as an adversarial step or a gradient penalty computes input gradients
    y = x.detach().requires_grad_()
    (grad,) = torch.autograd.grad((y * y).sum(), y)
    return grad, y.exp()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    "fn", [_flag_on_the_argument, _flag_through_the_class, _flag_on_a_computed_value, _gradient_of_a_detached_copy]
)
def test_requires_grad_inside_the_function_sets_the_flag_as_in_eager(backend, fn):
    """The results require grad and have a history, the argument's flag is set, and a backward reaches it."""

    def run(f):
        x = torch.linspace(-1, 1, 5)
        outs = f(x)
        outs = outs if isinstance(outs, tuple) else (outs,)
        state = [(o.requires_grad, o.grad_fn is None) for o in outs], x.requires_grad
        if outs[-1].grad_fn is not None:
            outs[-1].sum().backward()
        return [o.detach() for o in outs], state, x.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))  # (strict: no fallback)


def _leaf_made_inside(x):
    weight = torch.linspace(0, 1, 5, requires_grad=True)
    return weight, (x * weight).sum()


def _backward_of_a_leaf_made_inside(x):
    weight = torch.ones(5, requires_grad=True)
    (x * weight).sum().backward()
    return weight.grad, weight


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_leaf_made_inside, _backward_of_a_leaf_made_inside])
def test_a_tensor_made_requiring_grad_inside_the_function_is_a_leaf_as_in_eager(backend, fn):
    # Traced into the graph, torch.ones(..., requires_grad=True) came out of AOT autograd's graph not requiring
    # grad, and the results computed from it without history: backward() raised, or no gradient reached it.
    def run(f):
        outs = f(torch.linspace(-1, 1, 5))
        state = [(o.requires_grad, o.is_leaf) for o in outs]
        if outs[-1].grad_fn is not None:
            outs[-1].backward()
        return [o.detach() for o in outs], state, [o.grad for o in outs if o.is_leaf and o.requires_grad]

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))  # (strict: no fallback)


def _retained(x):
    y = x * 2
    y.retain_grad()
    return y, (y * y).sum()


def _retained_through_the_class(x):
    y = x.sin()
    torch.Tensor.retain_grad(y)
    return y, y.exp().sum()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_retained, _retained_through_the_class])
def test_retain_grad_inside_the_function_keeps_the_gradient_as_in_eager(backend, fn):
    # Traced into the graph, retain_grad ran on the backend's functional copy (or failed the compile): the
    # caller's tensor had no .grad after the backward.
    def run(f):
        x = torch.linspace(-1, 1, 5, requires_grad=True)
        kept, loss = f(x)
        loss.backward()
        return kept.detach(), kept.grad, x.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))  # (strict: no fallback)


def _view_made_in_an_enable_grad_block(x):
    with torch.enable_grad():
        v = x.select(0, -1)
    v.unsqueeze_(0)  # a graph break
    return v * 2


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_no_gradient_after_a_graph_ending_in_the_mode_of_its_view(backend):
    # The graph ended with gradients on (its view's mode) and nothing set the caller's no_grad back: `v * 2`
    # recorded a history and the backward reached the leaf, where eager records nothing.
    def run(fn):
        leaf = torch.ones(2, 1, requires_grad=True)
        x = leaf.clone()
        with torch.no_grad():
            out = fn(x)
        return out.requires_grad, out.detach()

    compiled = compiler.compile(_view_made_in_an_enable_grad_block, backend=backend)
    torch.testing.assert_close(run(compiled), run(_view_made_in_an_enable_grad_block))


def _detached_argument(x):
    return x.detach_() * 2


def _detached_through_the_class(x):
    torch.Tensor.detach_(x)
    return x.sin()


def _detached_computed_value(x):
    y = x * 3
    y.detach_()
    return y + x


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_detached_argument, _detached_through_the_class, _detached_computed_value])
def test_detach_in_place_stops_the_tensor_requiring_grad_as_in_eager(backend, fn):
    """Eager's ``detach_`` makes the caller's tensor (or a computed one) a leaf that no longer requires grad; a
    graph's functional copy of it would keep the flag, so the call runs in Python."""

    def run(f):
        x = torch.linspace(-1, 1, 5, requires_grad=True)
        out = f(x)
        if out.grad_fn is not None:
            out.sum().backward()
        return out.detach(), (out.requires_grad, x.requires_grad, x.is_leaf), x.grad

    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn))  # (strict: no fallback)


def _detaches_its_argument(x):
    x.detach_()
    return x * 2


@pytest.mark.parametrize("backend", ["inductor", "aot_eager", "eager"])
@pytest.mark.parametrize("view", [True, False])
def test_detach_in_place_of_an_argument_refuses_a_view_at_every_size(backend, view):
    """(a246:1286) Eager refuses ``detach_`` of a view. An input's fake is a view only while its sizes are static:
    at the recompile for new sizes, inductor's graph dropped the detach and the call returned where eager
    raises. A detach of a graph input now runs in Python."""
    compiled = compiler.compile(_detaches_its_argument, backend=backend)
    for sizes in [(0, 0, 0), (2, 1, 1), (3, 2, 2), (4, 3, 3)]:
        results = []
        for run in (_detaches_its_argument, compiled):
            x = torch.randn(sizes, generator=torch.Generator().manual_seed(0))
            x = x.mT if view else x
            try:
                results.append(run(x))
            except RuntimeError as error:
                results.append(str(error))
        assert type(results[1]) is type(results[0])
        if isinstance(results[0], str):
            assert results[1] == results[0]
        else:
            torch.testing.assert_close(results[1], results[0])


def _projection_detached_after_a_break(x):
    y = torch.nn.functional.linear(x, x.new_ones(2, x.shape[-1]))
    print(end="")  # a graph break: the first graph returns y
    y.detach_()  # eager's y is no view (``matmul`` returns an ``_unsafe_view`` of its product): this works
    return y


def _projection_returned(x):
    return torch.nn.functional.linear(x, x.new_ones(2, x.shape[-1])), x.sum(0)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(0, 0, 0), (2, 3, 4), (0, 3, 4)])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_an_output_eager_makes_no_view_is_none_compiled(backend, shape, requires_grad):
    """A graph's output of ``linear`` on a 3-d input was a view of the product's buffer (the wrapper's view of it,
    or a ``view`` put for an ``_unsafe_view``), so ``detach_()`` on it raised "Can't detach views in-place"."""

    def run(f):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(0), requires_grad=requires_grad)
        with torch.no_grad():
            out = f(x.clone())
        return out, [o._is_view() for o in (out if isinstance(out, tuple) else (out,))]

    for fn in (_projection_detached_after_a_break, _projection_returned):
        (actual, actual_views), (expected, expected_views) = run(compiler.compile(fn, backend=backend)), run(fn)
        torch.testing.assert_close(actual, expected)
        assert actual_views == expected_views


def _product_detached(a, b):
    y = a @ b
    y.detach_()  # eager's product is no view (``squeeze_``, ``_unsafe_view``): this works
    return y * 2


def _product_detached_after_a_break(a, b):
    y = torch.matmul(a, b)
    print(end="")  # a graph break: the first graph returns y
    y.detach_()
    return y


def _vector_projection_detached(a, b):
    # (the fuzzer's program a231:204) ``linear`` of a vector is a ``matmul``
    y = torch.nn.functional.linear(a, b.mT)
    y.detach_()
    return y


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize(
    "shapes", [((5,), (5, 4)), ((3, 2, 5), (3, 5, 4)), ((2, 5), (3, 5, 4)), ((2, 1, 2, 5), (3, 5, 4))]
)
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("dynamic", [False, True])
def test_a_matmul_product_is_no_view_as_in_eager(backend, shapes, requires_grad, dynamic):
    """With symbolic sizes the trace ran ``matmul``'s Python kernel, whose product is a view (``squeeze``,
    ``view``) where eager's is not: ``detach_()`` of it failed the compile (strict: an error), or, returned by a
    graph, raised in Python where eager's works. AOT autograd's inference graph returned a vector's product as a
    view whatever the sizes."""

    def run(f):
        generator = torch.Generator().manual_seed(0)
        a, b = (torch.randn(shape, generator=generator, requires_grad=requires_grad) for shape in shapes)
        out = f(a, b)
        return out, out._is_view(), out.requires_grad

    for fn in (_product_detached, _product_detached_after_a_break):
        actual, expected = run(compiler.compile(fn, backend=backend, dynamic=dynamic)), run(fn)
        torch.testing.assert_close(actual, expected)
    if len(shapes[0]) == 1:
        fn = _vector_projection_detached
        torch.testing.assert_close(run(compiler.compile(fn, backend=backend, dynamic=dynamic)), run(fn))


def _piece_detached_after_a_break(x):
    # (the fuzzer's program a229:1942) `float()` of a float tensor is the tensor itself: a piece of `split`
    piece = (x * 2).split(2, -1)[0].float()
    print(end="")  # a graph break: the first graph returns the piece
    piece.detach_()  # eager refuses: the piece is a view
    return piece


def _flattened_and_detached(x):
    # (the fuzzer's program a228:1454) a view: under inference mode autograd's kernel, which refuses views,
    # never runs
    flat = x.flatten()
    flat.detach_()
    return flat * 2


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("mode", [torch.no_grad, torch.enable_grad, torch.inference_mode])
@pytest.mark.parametrize("fn", [_piece_detached_after_a_break, _flattened_and_detached])
def test_detach_in_place_of_a_view_raises_only_where_eager_does(backend, mode, fn):
    """A view the graph returns was a tensor of its own from inductor-lite, so ``detach_()`` after the break
    worked where eager raises; under inference mode the graph's ``detach_`` of a view made the compile fail."""

    def run(f):
        results = []
        for shape in [(2, 3), (4, 1, 5)]:
            x = torch.randn(shape, generator=torch.Generator().manual_seed(0))
            with mode():
                try:
                    out = f(x)
                    results.append((out, out._is_view()))
                except RuntimeError as err:
                    results.append(str(err).split(".")[0])
        return results

    expected = run(fn)
    assert all(isinstance(r, str) for r in expected) == (mode is not torch.inference_mode)
    actual = run(compiler.compile(fn, backend=backend))
    assert [type(a) for a in actual] == [type(e) for e in expected]
    for a, e in zip(actual, expected):
        if isinstance(e, str):
            assert a == e
        else:
            torch.testing.assert_close(a[0], e[0])
            assert a[1] == e[1]


def _slice_of_a_product_detached_after_a_break(x):
    piece = (x * 2)[1:]
    print(end="")  # a graph break: the first graph returns the piece, which requires grad
    piece.detach_()  # eager refuses: the piece is a view
    return piece


def _slice_of_a_product_written_after_a_break(x):
    piece = (x * 2)[1:]
    print(end="")
    piece.mul_(3)  # recorded on the view's base, as eager records it
    return piece.exp()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_slice_of_a_product_detached_after_a_break, _slice_of_a_product_written_after_a_break])
def test_a_view_requiring_grad_the_graph_returns_is_a_view_as_in_eager(backend, fn):
    """Backends returned a slice of an intermediate that requires grad as a tensor of its own: ``detach_()``
    after the break worked where eager raises."""

    def run(f):
        x = torch.linspace(-1, 1, 5, requires_grad=True)
        try:
            out = f(x)
        except RuntimeError as err:
            return str(err).split(".")[0]
        out.sum().backward()
        return out.detach(), out._is_view(), x.grad

    expected = run(fn)
    assert isinstance(expected, str) == (fn is _slice_of_a_product_detached_after_a_break)
    actual = run(compiler.compile(fn, backend=backend))
    if isinstance(expected, str):
        assert actual == expected
    else:
        torch.testing.assert_close(actual, expected)
