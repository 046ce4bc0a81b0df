"""Training graphs against eager: zero gradients meeting infinite derivatives.

An output the loss never reaches gets a zero gradient that must put no NaN into the gradients behind an
infinite derivative (``sqrt`` at 0 or below); a zero gradient the loss does reach gives eager's NaN.

Each case runs the same function eagerly and through ``dynajit.compiler.compile`` on fresh copies of the same
leaves, runs a backward, and compares outputs, inputs after the call, gradients and exceptions.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")


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


def _product_beside_a_gathered_running_product(x):
    running = torch.gather(x.cumprod(0), 0, torch.zeros_like(x, dtype=torch.long))
    product = x.prod(0, keepdim=True)
    running.unsqueeze_(0)  # a graph break: `running` leaves the graph, an output the loss never reaches
    return product


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_unreached_output_gathered_puts_no_nan_into_the_gradients(backend):
    # The zero gradient of `running` is scattered into zeros by gather's backward before cumprod's: it must stay
    # a structural zero through the scatter, or 0 * inf puts NaN into the gradient of the product beside it.
    def run(f):
        leaf = torch.tensor([0.66, 0.27, -float("inf")]).requires_grad_()
        out = f(leaf.clone())
        out.sum().backward()
        return out.detach(), leaf.grad

    fn = _product_beside_a_gathered_running_product
    torch.testing.assert_close(run(compiler.compile(fn, backend=backend)), run(fn), equal_nan=True)


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


def _rolled_beside_a_chunk_of_a_root(x, w):
    rolled = x.roll(-2)
    piece = torch.nan_to_num(w.sqrt()).chunk(1, 0)[0]  # a view of an intermediate, returned from the graph
    print(end="")  # a graph break: `piece` leaves the graph, read below for its size only
    return x + rolled, piece.size(-1)


def _rolled_beside_rows_of_a_root(x, w):
    rolled = x.roll(-2)
    rows = torch.nan_to_num(w.sqrt()).unbind(0)
    print(end="")
    return x + rolled, len(rows)


def _assert_no_gradient_reaches_w(fn, backend, w_values, zeros_for_none=False):
    """``fn(x, w)``'s loss never reaches ``w``: eager leaves its gradient None, and so must the compiled call (or,
    with ``zeros_for_none``, give zeros: a compiled graph is one autograd node, as with torch.compile)."""

    def run(f):
        x, w = torch.tensor(0.5).requires_grad_(), torch.tensor(w_values).requires_grad_()
        out, size = f(x.clone(), w.clone())
        out.sum().backward()
        return out.detach(), size, x.grad, w.grad

    expected = run(fn)
    assert expected[3] is None
    actual = run(compiler.compile(fn, backend=backend))
    if zeros_for_none:
        assert actual[3] is None or not actual[3].count_nonzero(), actual[3]
        actual, expected = actual[:3], expected[:3]
    torch.testing.assert_close(actual, expected)


# Ops whose backward is linear in the gradient: a roll, a triangle, a pad (its backward pads back by negative
# amounts), a diagonal embedded (its backward takes the diagonal), a trace (its backward fills a diagonal), the
# parts of a complex tensor (the fuzzer's program a117-0:252), and the views, permutations, indexed writes and
# Fourier transforms the backwards of the others keep whole.
_LINEAR_PIECES = {
    "roll": lambda r: r.roll(1, 1),
    "tril": lambda r: r.tril(),
    "triu": lambda r: r.triu(1),
    "pad": lambda r: torch.nn.functional.pad(r, (1, 2)),
    "diag_embed": torch.diag_embed,
    "trace": lambda r: torch.trace(r).reshape(1, 1),
    # through complex numbers: their backwards view the gradient as complex, conjugate it and view it as real
    "complex_real": lambda r: torch.complex(r, r).real,
    "complex_conj_imag": lambda r: torch.complex(r, r * 2).conj().imag,
    "complex_abs": lambda r: torch.complex(r, r).abs(),
    "view_as_real": lambda r: torch.view_as_real(torch.complex(r, r)).sum(-1),
    # views, permutations and writes some backwards keep whole, and the Fourier transforms
    "as_strided": lambda r: r.as_strided((2, 1), (2, 1)),
    "unbind": lambda r: r.unbind(1)[0].reshape(2, 1),
    "take": lambda r: torch.take(r, torch.tensor([[0, 3]])),
    "rot90": lambda r: r.rot90(),
    "interpolate_nearest": lambda r: torch.nn.functional.interpolate(r[None, None], scale_factor=2)[0, 0],
    "pixel_shuffle": lambda r: torch.nn.functional.pixel_shuffle(r.reshape(1, 4, 1, 1), 2)[0, 0],
    "channel_shuffle": lambda r: torch.nn.functional.channel_shuffle(r.reshape(1, 2, 2, 1), 2).reshape(2, 2),
    "fft": lambda r: torch.fft.fft(r).real,
    "rfft": lambda r: torch.fft.rfft(r).abs(),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("piece", sorted(_LINEAR_PIECES))
def test_an_unreached_output_of_an_op_linear_in_its_gradient_puts_no_gradient_behind_it(backend, piece):
    op = _LINEAR_PIECES[piece]

    def fn(x, w):
        rolled = x.roll(-2)
        kept = op(torch.nan_to_num(w.sqrt()))
        print(end="")  # a graph break: `kept` leaves the graph, read below for its size only
        return x + rolled, kept.shape[-1]

    _assert_no_gradient_reaches_w(fn, backend, [[-1.0, 4.0], [2.0, -3.0]])


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("fn", [_rolled_beside_a_chunk_of_a_root, _rolled_beside_rows_of_a_root])
def test_an_unreached_chunk_or_row_puts_no_gradient_behind_it(backend, fn):
    # (the fuzzer's program a70-1:613) the backward of `chunk` and `unbind` joins the pieces' gradients with cat
    # and stack: a zero gradient must stay a structural zero through them, or sqrt's infinite derivative gave
    # `w` a NaN gradient where eager, which never reaches `w` from the loss, gives it none.
    _assert_no_gradient_reaches_w(fn, backend, [[-1.0, 4.0]])


# Ops whose backward is linear in the gradient only as a whole: ``logcumsumexp``'s takes the log of its gradient,
# and the solves divide by a diagonal, so a zero gradient taken through them step by step gave NaN beside an -inf
# or a zero on the diagonal, where eager, which never reaches `w` from the loss, gives no gradient. What the
# unreached output alone computes is zero, so `w`'s gradient is zeros: a compiled graph is one autograd node, and
# an input only its unreached outputs depend on gets zeros where eager leaves None, as with torch.compile.
_LINEAR_AS_A_WHOLE = {
    "logcumsumexp": (lambda w: w.logcumsumexp(1), [[float("-inf"), 4.0], [2.0, -3.0]]),
    "solve_triangular": (
        lambda w: torch.linalg.solve_triangular(w.triu(), torch.ones(2, 1), upper=True),
        [[0.0, 4.0], [2.0, 0.0]],
    ),
    "cholesky_solve": (lambda w: torch.cholesky_solve(torch.ones(2, 1), w.tril()), [[0.0, 4.0], [2.0, 0.0]]),
}


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("piece", sorted(_LINEAR_AS_A_WHOLE))
def test_an_unreached_output_of_an_op_linear_only_as_a_whole_puts_no_nan_behind_it(backend, piece):
    op, w_values = _LINEAR_AS_A_WHOLE[piece]

    def fn(x, w):
        rolled = x.roll(-2)
        kept = op(w)
        print(end="")  # a graph break: `kept` leaves the graph, read below for its size only
        return x + rolled, kept.shape[-1]

    _assert_no_gradient_reaches_w(fn, backend, w_values, zeros_for_none=True)


def _empty_cummax_beside_a_side_output(x, box):
    # (the fuzzer's program a124:200) `x` is empty; the gradient `x` gets from the reached output is built from
    # `x` alone, no tangent in it, and the unreached one, `box.t`, adds its tangent: eager reached `x`, so its
    # gradient is an empty tensor, which came back None
    box.t = x - 1
    return x.cummax(-2).values


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("shape", [(1, 0), (2, 3)])
def test_a_gradient_the_loss_reaches_with_no_tangent_in_it_stays_a_tensor(backend, shape):
    class Box:
        t = None

    def run(f):
        leaf = torch.randn(shape, generator=torch.Generator().manual_seed(0)).requires_grad_()
        out = f(leaf.clone(), Box())
        (out * 2).sum().backward()
        return out.detach(), leaf.grad

    expected = run(_empty_cummax_beside_a_side_output)
    assert expected[1] is not None
    torch.testing.assert_close(run(compiler.compile(_empty_cummax_beside_a_side_output, backend=backend)), expected)


def _unreached_beside_reached(x):
    # one gradient for `x` adds what comes from the reached output and from the unreached one
    doubled, total = x * 2, x.logcumsumexp(1)
    print(end="")  # a graph break: `total` leaves the graph, the loss reads `doubled` only
    return doubled, total


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_an_unreached_output_beside_a_reached_one_adds_nothing_to_their_input_gradient(backend):
    def run(f):
        leaf = torch.tensor([[float("-inf"), 4.0], [2.0, -3.0]]).requires_grad_()
        out, total = f(leaf.clone())
        out.sum().backward()
        return out.detach(), total.detach(), leaf.grad

    torch.testing.assert_close(
        run(compiler.compile(_unreached_beside_reached, backend=backend)), run(_unreached_beside_reached)
    )


def _variance_after_a_break_in_a_no_grad_block(x):
    # (the fuzzer's program a229:2022) the break cuts the graph inside the block: the graph after it starts
    # without gradients and computes the variance with them
    with torch.set_grad_enabled(False):
        x.unbind(0)[0]
    variance = x.var(0, keepdim=True)  # of one row: NaN, its derivative infinite
    print(end="")
    return variance.clamp(min=1)  # clamp's gradient at NaN is a zero the loss reached


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("mode", [torch.enable_grad, torch.no_grad])
def test_a_graph_leaving_a_no_grad_block_records_eager_derivatives_and_reaches_its_zero_gradients(backend, mode):
    # Compiled as an inference graph, the variance's decomposition ran under autograd (a zero gradient where
    # eager's is NaN); compiled with gradients, its output's zero gradient was taken for one the loss never
    # reached, as the graph ends without gradients.
    def run(f):
        leaf = torch.randn(1, 3, generator=torch.Generator().manual_seed(0)).requires_grad_()
        with mode():  # the graph after the break is compiled in the first call's mode, then reused
            f(leaf.clone())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # var(): degrees of freedom is <= 0
            out = f(leaf.clone())
        out.sum().backward()
        return out.detach(), leaf.grad

    expected = run(_variance_after_a_break_in_a_no_grad_block)
    assert expected[1].isnan().all()
    torch.testing.assert_close(
        run(compiler.compile(_variance_after_a_break_in_a_no_grad_block, backend=backend)), expected, equal_nan=True
    )
