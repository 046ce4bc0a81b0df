"""Views and grad mode: a view made under no_grad of a tensor that requires grad is, in eager, a leaf of its own
that requires grad; a view made with gradients keeps its history, even when a graph break falls inside a
``no_grad`` block after it.

Such a view has no history (``grad_fn`` is None), so a gradient reaching it stays in it (its ``.grad``) and
never reaches the tensor it views; an op recording gradients on it gives a result that requires grad. Each
case runs eagerly and compiled on clones of the same leaf, runs a backward where the outputs allow one, and
compares the outputs' values and autograd state, the leaf's gradient and the returned views' gradients.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from dynajit import compiler

BACKENDS = ["inductor", "aot_eager", "eager"]


def returned_view(x):
    with torch.no_grad():
        v = x.reshape(-1)
    return v


def view_used_after_the_block(x):
    with torch.no_grad():
        v = x.reshape(-1)
    return v * 2, v


def views_of_a_split(x):
    with torch.no_grad():
        a, b = x.split(1, 0)
    return a + 1, b


def two_views_in_one_block(x):
    # The first view breaks the graph; the resume function starts inside the block, without gradients, and
    # its graph must end before the block does.
    with torch.no_grad():
        v = x.reshape(-1)
        w = x.unbind(0)[0]
    return w, v


def break_first_in_the_block(x):
    # The graph is cut just inside the block: its outputs, a view of an intermediate among them, were made
    # under no_grad after it ran, and the gradient stopped at the view.
    doubled = x * 2  # alive across the break: the graph returns it and its view
    v = doubled[0]
    with torch.no_grad():
        print(end="")
    return v * 1


def break_after_ops_in_the_block(x):
    doubled = x * 2
    v = doubled[0]
    with torch.no_grad():
        y = x + 1
        print(end="")
    return v * 1, y


def product_under_no_grad(x):
    with torch.no_grad():
        y = x * 2
    return y + x, y


def view_of_the_view_after_the_block(x):
    # (a31-1:2663) the resumed graph takes the view and its base; AOT autograd rebuilt the returned view of the
    # view from the base, so the gradient reached the base past eager's leaf view
    with torch.no_grad():
        v = x.view(x.shape[0], -1)
    return v.unbind(1)[0]


def view_of_the_view_beside_its_base(x):
    with torch.no_grad():
        v = x.view(x.shape[0], -1)
    return v[:, 0], x * 2


def _autograd_state(t: Any) -> Any:
    return (t.requires_grad, t.grad_fn is None, t.is_leaf) if isinstance(t, torch.Tensor) else t


def _run(fn: Any) -> tuple[Any, ...]:
    leaf = torch.randn(2, 3, generator=torch.Generator().manual_seed(0)).requires_grad_()
    outs = fn(leaf.clone())
    states = [_autograd_state(o) for o in outs] if isinstance(outs, tuple) else [_autograd_state(outs)]
    tensors = list(outs) if isinstance(outs, tuple) else [outs]
    weighted = [(t * (i + 2)).sum() for i, t in enumerate(tensors) if t.requires_grad]
    if weighted:
        sum(weighted).backward()
    return (
        [t.detach() for t in tensors],
        states,
        leaf.grad,
        [t.grad if t.is_leaf and t.requires_grad else None for t in tensors],
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn",
    [
        returned_view,
        view_used_after_the_block,
        views_of_a_split,
        two_views_in_one_block,
        break_first_in_the_block,
        break_after_ops_in_the_block,
        product_under_no_grad,
        view_of_the_view_after_the_block,
        view_of_the_view_beside_its_base,
    ],
)
def test_views_keep_eagers_autograd_state_around_no_grad_blocks(fn, backend):
    # AOT autograd differentiated through the view into its base (a returned view), or functionalized it into a
    # value that requires no grad (``v * 2`` after the block).
    compiler.reset()
    torch.testing.assert_close(_run(compiler.compile(fn, backend=backend)), _run(fn))


@pytest.mark.parametrize("backend", BACKENDS)
def test_without_gradients_the_frame_keeps_its_views_in_one_graph(backend):
    # A frame entered under no_grad (inference) makes its outputs in that mode: the views stay in the graph.
    compiler.reset()
    linear = torch.nn.Linear(3, 4)

    def forward(x):
        return linear(x), linear.weight.t()

    compiled = compiler.compile(forward, backend=backend, fullgraph=True)
    x = torch.randn(2, 3)
    with torch.no_grad():
        expected, actual = forward(x), compiled(x)
    assert [_autograd_state(t) for t in actual] == [_autograd_state(t) for t in expected]
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_recording_gradients_of_a_view_made_without_them_is_left_to_python(backend):
    # enable_grad inside a frame entered under no_grad: the view, made in the graph, is used by Python.
    compiler.reset()

    def fn(x):
        v = x.t()
        with torch.enable_grad():
            return v * 2

    compiled = compiler.compile(fn, backend=backend)
    x = torch.randn(2, 3, requires_grad=True)
    with torch.no_grad():
        expected, actual = fn(x), compiled(x)
    assert _autograd_state(actual) == _autograd_state(expected)
    torch.testing.assert_close(actual, expected)


def writes_its_input_with_gradients(x):
    with torch.enable_grad():
        x.mul_(0.5)
        y = x * 1
    return y


def writes_a_view_of_its_input_with_gradients(x):
    # The write breaks the graph: the view it writes into, made with gradients, must come back as one.
    with torch.enable_grad():
        row = x[0]
        row.mul_(0.5)
        y = x * 1
    return y


def writes_its_input_and_returns_something_else(x):
    with torch.enable_grad():
        x.mul_(0.5)
    return x.detach() * 0


def write_after_a_break_in_a_no_grad_block(x):
    # (a training frame) the resume function starts inside the block, without gradients, and records them after
    gathered = torch.gather(x, 0, torch.zeros_like(x, dtype=torch.long))
    with torch.no_grad():
        x.broadcast_to(gathered.shape)  # a view made under no_grad: a graph break
    gathered.mul_(0.5)
    return torch.cat([gathered, gathered], 0)


def writes_its_input_without_gradients_then_breaks(x):
    # Eager keeps x's history (the write bumps only its version); AOT autograd's inference graph copied the new
    # value in after the graph with gradients recorded, and x's gradient became 0.
    with torch.no_grad():
        x.mul_(0.5)
        print(end="")
    return x * 2


def breaks_then_writes_its_input_without_gradients(x):
    with torch.no_grad():
        print(end="")
        x.add_(1)
    return x.sin()


def _run_writing(fn: Any, mode: Any) -> tuple[Any, ...]:
    leaf = torch.randn(2, 3, generator=torch.Generator().manual_seed(0)).requires_grad_()
    x = leaf * 1  # its history is what the write changes
    with mode():
        out = fn(x)
    state = (_autograd_state(out), _autograd_state(x))
    if out.requires_grad:
        (out * 2).sum().backward(retain_graph=True)
    (x * 3).sum().backward()
    return out.detach(), state, leaf.grad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    ("fn", "mode"),
    [
        (writes_its_input_with_gradients, torch.no_grad),
        (writes_a_view_of_its_input_with_gradients, torch.no_grad),
        (writes_its_input_and_returns_something_else, torch.no_grad),
        (write_after_a_break_in_a_no_grad_block, torch.enable_grad),
        (writes_its_input_without_gradients_then_breaks, torch.enable_grad),
        (breaks_then_writes_its_input_without_gradients, torch.enable_grad),
    ],
)
def test_writes_into_an_input_with_history_keep_it_whatever_the_grad_mode(fn, mode, backend):
    # AOT autograd made an inference graph of these: the written input kept its old history (a gradient of 3
    # where eager's is 1.5) and what read it after the write required no grad.
    compiler.reset()
    torch.testing.assert_close(_run_writing(compiler.compile(fn, backend=backend), mode), _run_writing(fn, mode))


def _compare_under_mode(fn: Any, mode: Any, leaf: bool, backend: str, shape: tuple[int, ...]) -> None:
    """Run ``fn`` eagerly and compiled under ``mode`` on a tensor requiring grad (a leaf or not) and compare the
    outputs' values and autograd state and the input's value after the call."""
    compiler.reset()
    compiled = compiler.compile(fn, backend=backend)
    results = []
    for run in (fn, compiled):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)).requires_grad_()
        x = x if leaf else x * 1
        with mode():
            out = run(x)
        outs = out if isinstance(out, tuple) else (out,)
        results.append(([t.detach() for t in outs], [(t.requires_grad, t.is_inference()) for t in outs], x.detach()))
    torch.testing.assert_close(results[1], results[0])


def writes_a_view_it_returns(x):
    v = x[:, 1::2]
    v[..., 0] = 1
    return v


def writes_a_view_then_breaks(x):
    v = x[:, 1::2]
    v[..., 0] = 1
    print(end="")
    return v * 1, v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non_leaf"])
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize("fn", [writes_a_view_it_returns, writes_a_view_then_breaks])
def test_views_made_without_gradients_and_written_compile_or_run_in_python(fn, mode, leaf, backend):
    # AOT autograd refused such a graph (it reads the written view's history with gradients on), and a resume
    # function could not fake a view autograd refuses to read: each compile fell back to eager.
    _compare_under_mode(fn, mode, leaf, backend, (2, 4, 3))


def transposes_a_view_in_place(x):
    v = x.reshape(x.shape[0], -1)
    v.transpose_(0, 1)
    return x * 1


def scales_a_view_in_place(x):
    v = x.reshape(x.shape[0], -1)
    v.mul_(2)
    return v * 1


def zeroes_a_view_after_a_break(x):
    v = x[0]
    print(end="")
    v.zero_()
    return x * 1


def adds_into_a_view_after_a_break(x):
    v = x[0]
    print(end="")
    return v.add_(1) * 2


def unsqueezes_a_view_in_place(x):
    v = x[0]
    v.unsqueeze_(0)
    return x + 1, v * 1


def writes_the_base_of_a_view(x):
    v = x[0]
    x.mul_(2)
    print(end="")
    return v + 1


def unsqueezes_itself_then_records_gradients(x):
    x.unsqueeze_(0)
    with torch.enable_grad():
        v = x.clone()
    return v * 2, x + 1


def unsqueezes_itself_then_records_gradients_after_a_call(x):
    x.unsqueeze_(0)
    with torch.enable_grad():
        v = x.clone()

    def inner(p):
        w = x.narrow(2, 0, 1)
        w.zero_()

    inner(v)
    return v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "non_leaf"])
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
@pytest.mark.parametrize(
    "fn",
    [
        transposes_a_view_in_place,
        unsqueezes_itself_then_records_gradients,
        unsqueezes_itself_then_records_gradients_after_a_call,
        scales_a_view_in_place,
        zeroes_a_view_after_a_break,
        adds_into_a_view_after_a_break,
        unsqueezes_a_view_in_place,
        writes_the_base_of_a_view,
    ],
)
def test_in_place_ops_on_views_made_without_gradients_compile_or_run_in_python(fn, mode, leaf, backend):
    # AOT autograd replays an in-place op on such a view with gradients recorded, which autograd refuses
    # ("a view was created in no_grad mode and ... modified inplace"): each compile fell back to eager.
    _compare_under_mode(fn, mode, leaf, backend, (2, 3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_frame_entered_under_no_grad_writing_a_view_made_with_gradients_compiles_once(backend):
    # Its graph is compiled and called in grad mode (AOT autograd remakes the view in the mode of the call). It
    # once worked only because compiling left grad mode on: the first call ran in it, and every later call,
    # failing the GLOBAL_STATE guard that had recorded it, compiled the frame again.
    from dynajit.capture.testing import CompileCounterWithBackend
    from dynajit.compiler._registry import lookup_backend

    compiler.reset()
    counter = CompileCounterWithBackend(lookup_backend(backend))
    compiled = compiler.compile(writes_a_view_of_its_input_with_gradients, backend=counter)
    for _ in range(3):
        torch.testing.assert_close(
            _run_writing(compiled, torch.no_grad),
            _run_writing(writes_a_view_of_its_input_with_gradients, torch.no_grad),
        )
    assert counter.frame_count == 2  # the graph before the write, and the resume function's after it


def chunks_a_view_made_under_inference_mode(x):
    with torch.inference_mode():
        v = x.unsqueeze(-2)
    also = x  # the input read after the block: the graph's first input in the view's memory
    return v.chunk(2, -3)[-1], also * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_view_made_without_gradients_beside_its_base_keeps_the_gradient_from_the_base(backend):
    # a278.1:136. The graph after the block took `x` and the view `v` as inputs; read in the order the code loads
    # them, `x` came first, and the check asked only the first input in the view's memory: it saw `x`, not the
    # leaf view, and AOT autograd rebuilt the returned piece from `x`, whose gradient eager's view keeps back.
    compiler.reset()
    compiled = compiler.compile(chunks_a_view_made_under_inference_mode, backend=backend)
    assert [_gradient_reaching_the_leaf(run) for run in (chunks_a_view_made_under_inference_mode, compiled)] == [
        None,
        None,
    ]


def _gradient_reaching_the_leaf(run):
    leaf = torch.randn(1, 1, 3, requires_grad=True)
    piece, _ = run(leaf * 1)
    assert piece.requires_grad
    piece.sum().backward()
    return leaf.grad
