"""Autocast blocks (``torch.autocast``, ``torch.amp.autocast``, decorators) traced into the graph, compared with eager."""

import contextlib
import warnings

import pytest
import torch
from torch.amp.autocast_mode import _enter_autocast, _exit_autocast

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter

BF16 = torch.bfloat16


def autocast_is_off():
    return not torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == BF16


def counted(fn):
    """``fn`` compiled with a CompileCounter, and the counter."""
    counter = CompileCounter()
    return counter, capture.optimize(counter)(fn)


def break_reasons(check, fn, *args, **options):
    """Run the differential check; return the reasons of the graph breaks it met."""
    with capture.observe() as seen:
        check(fn, *args, **options)
    return [b.reason for frame in seen.frames for b in frame.graph_breaks]


def a_matmul_bf16(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        s = y + 1  # add is not on autocast's lists: it keeps y's dtype
    return y, s, (s.float() * 2).relu()


def a_amp_spelling(x, w):
    with torch.amp.autocast(device_type="cpu", dtype=torch.bfloat16):
        y = torch.nn.functional.linear(x, w)
    return y, y.dtype


def a_float16(x, w):
    with torch.autocast("cpu", dtype=torch.float16):
        y = torch.mm(x, w)
    return y


def a_default_dtype(x, w):
    with torch.autocast("cpu"):
        return x @ w


def a_nested(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ w
        with torch.autocast("cpu", dtype=torch.float16):
            b = x @ w
        c = x @ w
    return a, b, c


def a_disabled_inside(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x @ w
        with torch.autocast(device_type="cpu", enabled=False):
            b = a.float() @ w
        c = b @ w
    return a, b, c


def a_bound_with_as(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16) as ac:
        y = x @ w
    return y, ac.fast_dtype, ac.device


def a_reads_state(x, w):
    with torch.autocast("cpu", dtype=torch.float16):
        inside = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
        y = x @ w
    return y, inside, torch.is_autocast_enabled("cpu")


def _project(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return torch.tanh(x @ w)


def a_in_inlined_function(x, w):
    return _project(x, w).float() + 1


@torch.autocast("cpu", dtype=torch.bfloat16)
def _decorated(x, w):
    return x @ w


def a_decorated_callee(x, w):
    return _decorated(x, w) * 2


SHARED = torch.autocast("cpu", dtype=torch.float16)


def a_existing_object(x, w):
    with SHARED:
        y = x @ w
    return y


def a_with_grad_mode(x, w):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    return y, y.requires_grad


AUTOCAST_FUNCTIONS = [
    a_matmul_bf16, a_amp_spelling, a_float16, a_default_dtype, a_nested, a_disabled_inside, a_bound_with_as,
    a_reads_state, a_in_inlined_function, a_decorated_callee, a_existing_object, a_with_grad_mode,
]  # fmt: skip


@pytest.mark.parametrize("fn", AUTOCAST_FUNCTIONS, ids=lambda f: f.__name__)
def test_autocast_blocks_are_one_graph(check, t, fn):
    assert break_reasons(check, fn, t(4, 8), t(8, 8).requires_grad_(), graphs=1, calls=2) == []
    assert autocast_is_off()


def test_the_graph_enters_and_leaves_autocast(t):
    counter = CompileCounter()
    capture.optimize(counter)(a_disabled_inside)(t(4, 8), t(8, 8))
    (gm,) = counter.graphs
    calls = [(n.target, n.args) for n in gm.graph.nodes if n.target in (_enter_autocast, _exit_autocast)]
    outer, inner = (n for n in gm.graph.nodes if n.target is _enter_autocast)
    assert calls == [
        (_enter_autocast, ("cpu", BF16, True, True)),
        (_enter_autocast, ("cpu", BF16, False, True)),
        (_exit_autocast, (inner,)),
        (_exit_autocast, (outer,)),
    ]
    dtypes = [n.meta["example_value"].dtype for n in gm.graph.nodes if n.op == "call_function" and "matmul" in n.name]
    assert dtypes == [BF16, torch.float32, BF16]  # the last one is back under the outer block


def _aot_backend(gm, example_inputs):
    """AOT autograd running its forward and backward graphs as they are."""
    from functorch.compile import aot_module_simplified, make_boxed_func

    def run_as_is(graph, inputs):
        return make_boxed_func(graph.forward)

    return aot_module_simplified(gm, example_inputs, fw_compiler=run_as_is, bw_compiler=run_as_is)


def _train_step(x, w, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = torch.relu(x @ w + b)
        with torch.autocast("cpu", enabled=False):
            norm = h.float().pow(2).mean()
        out = h @ w.t()
    return (out.float().sum() + norm), out.dtype


@pytest.mark.parametrize("backend", ["eager", "aot_autograd"])
def test_backward_through_an_autocast_region(t, backend):
    x, w, b = t(6, 8), t(8, 8), t(8)
    params = [p.clone().requires_grad_() for p in (w, b)]
    expected_loss, expected_dtype = _train_step(x, *params)
    expected_loss.backward()
    counter = CompileCounter() if backend == "eager" else None
    compiled = capture.optimize(counter if counter is not None else _aot_backend, fullgraph=True)(_train_step)
    compiled_params = [p.clone().requires_grad_() for p in (w, b)]
    loss, dtype = compiled(x, *compiled_params)
    loss.backward()
    assert dtype == expected_dtype == BF16 and loss.dtype == torch.float32
    # AOT autograd may order bfloat16 work differently from eager: compare at bfloat16's precision.
    tolerance = {"rtol": 0.0, "atol": 0.0} if backend == "eager" else {"rtol": 2e-2, "atol": 0.5}
    torch.testing.assert_close(loss, expected_loss, **tolerance)
    for got, want in zip(compiled_params, params):
        assert got.grad.dtype == want.grad.dtype == torch.float32
        scale = want.grad.abs().max().item()
        tolerance = {"rtol": 0.0, "atol": 0.0} if backend == "eager" else {"rtol": 2e-2, "atol": 2e-2 * scale}
        torch.testing.assert_close(got.grad, want.grad, **tolerance)
    assert autocast_is_off()


def test_aot_autograd_turns_autocast_into_casts(t):
    compiled = capture.optimize(_aot_backend, fullgraph=True)(a_nested)
    x, w = t(4, 8), t(8, 8)
    for got, want in zip(compiled(x, w), a_nested(x, w)):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)


def g_break_inside(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        capture.graph_break()
        z = y @ w.bfloat16()
    return z, z.float() + 1


def test_break_inside_an_autocast_block_runs_the_frame_eagerly(check, t):
    (reason,) = break_reasons(check, g_break_inside, t(4, 8), t(8, 8), graphs=0)
    assert reason == "a graph break inside an autocast block cannot be resumed (graph_break() was called)"
    assert autocast_is_off()


def g_break_before(x, w):
    y = x.sin()
    capture.graph_break()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = y @ w
    return z


def g_made_before_break(x, w):
    ac = torch.autocast("cpu", dtype=torch.bfloat16)
    y = x.sin()
    capture.graph_break()
    with ac:
        z = y @ w
    return z, ac.fast_dtype


@pytest.mark.parametrize("fn", [g_break_before, g_made_before_break], ids=lambda f: f.__name__)
def test_autocast_block_after_a_break(check, t, fn):
    reasons = break_reasons(check, fn, t(4, 8), t(8, 8), graphs=2, calls=2)
    assert reasons == ["graph_break() was called"]
    assert autocast_is_off()


def g_fails_inside(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return x @ w.t()  # a shape mismatch: raised in Python, as in eager


def test_tracing_that_stops_inside_a_block_leaves_autocast(check, t):
    (reason,) = break_reasons(check, g_fails_inside, t(4, 8), t(8, 6), graphs=0)
    assert "matmul cannot be traced on fake tensors" in reason  # tracing was inside the block
    assert autocast_is_off()


def test_called_inside_an_eager_autocast_block_recompiles(t):
    counter, compiled = counted(a_disabled_inside)
    x, w = t(4, 8), t(8, 8)
    compiled(x, w)
    with torch.autocast("cpu", dtype=torch.float16):
        got = compiled(x, w)
        want = a_disabled_inside(x, w)
    assert counter.frame_count == 2
    for g, e in zip(got, want):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
    assert autocast_is_off()


def test_decorated_function_compiled_directly(check, t):
    assert break_reasons(check, _decorated, t(4, 8), t(8, 8), graphs=1) == []


class MixedPrecisionNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            h = torch.relu(self.fc1(x))
        return self.fc2(h.float()).log_softmax(-1)


class DecoratedForward(MixedPrecisionNet):
    @torch.autocast("cpu", dtype=torch.bfloat16)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.mark.parametrize("cls", [MixedPrecisionNet, DecoratedForward], ids=lambda c: c.__name__)
def test_module_forward_with_autocast(check, t, cls):
    torch.manual_seed(0)
    assert break_reasons(check, cls(), t(3, 8), graphs=1) == []


def test_a_graph_module_with_autocast_nodes_is_traced_again(t):
    first = CompileCounter()
    capture.optimize(first)(a_nested)(t(4, 8), t(8, 8))
    (gm,) = first.graphs
    again = CompileCounter()
    x, w = t(4, 8), t(8, 8)
    got = capture.optimize(again, fullgraph=True)(gm)(x, w)
    for g, e in zip(got, a_nested(x, w)):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
    targets = [n.target for n in again.graphs[0].graph.nodes]
    assert targets.count(_enter_autocast) == 2 and targets.count(_exit_autocast) == 2


def g_unsupported_dtype(x, w):
    with torch.autocast("cpu", dtype=torch.float64):  # torch warns and disables autocast
        return x @ w


def test_an_autocast_that_warns_is_made_in_python(check, t):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(g_unsupported_dtype, t(4, 8), t(8, 8), graphs=1)
    messages = [str(w.message) for w in caught if "target dtype is not supported" in str(w.message)]
    assert len(messages) == 2  # once eagerly, once compiled


def g_bad_device(x):
    with torch.autocast("no-such-device"):
        return x + 1


def g_device_not_a_string(x):
    with torch.autocast(torch.device("cpu")):
        return x + 1


@pytest.mark.parametrize("fn", [g_bad_device, g_device_not_a_string], ids=lambda f: f.__name__)
def test_bad_autocast_arguments_raise_as_in_eager(check, t, fn):
    (reason,) = break_reasons(check, fn, t(4), graphs=0)
    assert reason.startswith("torch.autocast(...) raises ")
    assert autocast_is_off()


def _project_with_break(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        capture.graph_break()
        return y.relu()


def g_break_in_inlined_block(x, w):
    y = x.cos()
    return _project_with_break(y, w).float() + 1


def test_break_inside_an_inlined_autocast_block(check, t):
    reasons = break_reasons(check, g_break_in_inlined_block, t(4, 8), t(8, 8), calls=2)
    assert reasons[0] == "graph_break() was called"  # the caller's graph stops at the call
    assert "inside an autocast block" in reasons[1]  # the callee runs its own frame eagerly
    assert autocast_is_off()


def a_reads_default_dtype(x, w):
    dtype = torch.get_autocast_dtype("cpu")  # read outside any block: autocast's default, baked in
    return x.to(dtype) + 1


def a_enter_with_default_dtype(x, w):
    ctx = _enter_autocast("cpu", None, True, True)
    y = x @ w
    _exit_autocast(ctx)
    return y


@contextlib.contextmanager
def default_autocast_dtype(dtype):
    previous = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", dtype)
    try:
        yield
    finally:
        torch.set_autocast_dtype("cpu", previous)


@pytest.mark.parametrize(
    "fn", [a_default_dtype, a_reads_default_dtype, a_enter_with_default_dtype], ids=lambda f: f.__name__
)
def test_changing_the_default_autocast_dtype_recompiles(t, fn):
    counter, compiled = counted(fn)
    x, w = t(4, 8), t(8, 8)
    assert compiled(x, w).dtype == fn(x, w).dtype == BF16
    with capture.observe() as seen, default_autocast_dtype(torch.float16):
        got, want = compiled(x, w), fn(x, w)
    assert got.dtype == want.dtype == torch.float16
    torch.testing.assert_close(got, want)
    assert counter.frame_count == 2
    (record,) = seen.frames
    assert [r.split(": ", 1)[1] for r in record.recompile_reasons] == [
        "global state autocast(cpu) dtype: expected bfloat16, got float16"
    ]
    assert compiled(x, w).dtype == BF16 and counter.frame_count == 2  # the first entry serves again
    assert autocast_is_off()


def test_an_explicit_autocast_dtype_does_not_guard_the_default(t):
    counter, compiled = counted(a_float16)
    x, w = t(4, 8), t(8, 8)
    compiled(x, w)
    with default_autocast_dtype(torch.float16):
        assert compiled(x, w).dtype == a_float16(x, w).dtype == torch.float16
    assert counter.frame_count == 1
