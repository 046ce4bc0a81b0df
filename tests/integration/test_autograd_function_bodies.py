"""autograd Functions whose methods read globals or have effects: guarded, or run in Python, as eager runs them.

An AOT backend traces the Function's forward and backward once and keeps what
they computed from Python values, so a global they read must be guarded, and
a method with an effect Python sees (a list appended to, a class attribute
counted) must run as often as in eager: the call is then a graph break.
"""

from __future__ import annotations

import builtins
import math
import types

import pytest
import torch
from torch.autograd.function import once_differentiable

import dynajit.capture as capture
import dynajit.compiler

BACKENDS = ["eager", "aot_eager", "inductor"]
SCALE = 2.0
EPS = 1e-3
EVENTS: list[str] = []
SETTINGS = types.ModuleType("settings")  # a module of the program's own: its attributes can change
SETTINGS.factor = 3.0


class ScaledByGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * SCALE

    @staticmethod
    def backward(ctx, grad):
        return grad * SCALE + 1  # the + 1 shows this backward ran


class Logged(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        EVENTS.append("forward")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        EVENTS.append("backward")
        return grad * 2


class LoggedThroughVjp(torch.autograd.Function):
    """Defines ``vjp``, the backward's other name."""

    @staticmethod
    def forward(ctx, x):
        return x * 3

    @staticmethod
    def vjp(ctx, grad):
        EVENTS.append("vjp")
        return grad * 3


WEIGHTS = (1.0, 2.0)


class WeightedByTuple(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * WEIGHTS[0] + WEIGHTS[1]

    @staticmethod
    def backward(ctx, grad):
        return grad * WEIGHTS[0]


class CountsItsCalls(torch.autograd.Function):
    calls = 0

    @staticmethod
    def forward(ctx, x):
        CountsItsCalls.calls += 1
        return x * CountsItsCalls.calls

    @staticmethod
    def backward(ctx, grad):
        return grad


class ReadsSettings(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * SETTINGS.factor

    @staticmethod
    def backward(ctx, grad):
        return grad * SETTINGS.factor


class AppendsToItsArgument(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, seen):
        seen.append(len(seen))
        return x * len(seen)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Reseeds(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        torch.manual_seed(7)  # process state: the draws after the call depend on it
        return x + torch.rand_like(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class PrintsThroughBuiltins(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        builtins.print(end="")
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


class Library(torch.autograd.Function):
    """Reads only torch, math, builtins, a constant and ctx: one graph node."""

    @staticmethod
    def forward(ctx, x, power):
        ctx.save_for_backward(x)
        ctx.power = power
        return torch.sigmoid(x) * math.sqrt(2.0) + abs(-EPS) * x**power

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        s = torch.sigmoid(x)
        return grad * (s * (1 - s) * math.sqrt(2.0) + EPS * ctx.power * x ** (ctx.power - 1)), None


def swish_forward(x, shift=0.0):
    return x.mul(torch.sigmoid(x + shift)) * SCALE


def swish_backward(x, grad):
    s = torch.sigmoid(x)
    return grad * (s * (1 + x * (1 - s))) * SCALE


class SwishByHelpers(torch.autograd.Function):
    """timm's memory-efficient activations: the methods call module-level helpers."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return swish_forward(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return swish_backward(x, grad)


def closure_function(box: list[float]) -> type[torch.autograd.Function]:
    class FromClosure(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * box[0]

        @staticmethod
        def backward(ctx, grad):
            return grad * box[0]

    return FromClosure


BOX = [2.0]
FROM_CLOSURE = closure_function(BOX)


def scaled(x):
    return ScaledByGlobal.apply(x + 1).sum()


def logged(x):
    return Logged.apply(x.sin()).sum()


def through_vjp(x):
    return LoggedThroughVjp.apply(x.exp()).sum()


def weighted(x):
    return WeightedByTuple.apply(x - 1).sum()


def counted(x):
    return CountsItsCalls.apply(x + 1).sum()


def settings(x):
    return ReadsSettings.apply(x.cos()).sum()


def appends(x):
    return AppendsToItsArgument.apply(x + 1, []).sum()


def library(x):
    return Library.apply(x * 2, 3).sum()


def swish(x):
    return SwishByHelpers.apply(x * 3).sum()


def from_closure(x):
    return FROM_CLOSURE.apply(x - 1).sum()


def reseeds(x):
    return Reseeds.apply(x * 2).sum()


def prints(x):
    return PrintsThroughBuiltins.apply(x + 1).sum()


def _differential(fn, backend, change=lambda call: None, calls=3):
    """Eager and compiled on equal inputs, call by call: values, gradients and the events each call logged."""
    global SCALE, EPS, WEIGHTS
    capture.reset()
    compiled = dynajit.compiler.compile(fn, backend=backend)
    saved = SCALE, EPS, WEIGHTS, SETTINGS.factor, BOX[0], CountsItsCalls.calls
    try:
        for call in range(calls):
            change(call)
            torch.manual_seed(call)
            x = torch.randn(3 + call % 2, requires_grad=True)
            y = x.detach().clone().requires_grad_()
            runs = []
            for f, arg in ((fn, x), (compiled, y)):
                EVENTS.clear()
                CountsItsCalls.calls = call  # both runs start from the same count
                result = f(arg)
                result.backward()
                runs.append((result.detach(), arg.grad, list(EVENTS), CountsItsCalls.calls))
            (expected, expected_grad, expected_events, expected_count), (actual, grad, events, count) = runs
            torch.testing.assert_close(actual, expected)
            torch.testing.assert_close(grad, expected_grad)
            assert events == expected_events, f"call {call}: compiled logged {events}, eager {expected_events}"
            assert count == expected_count
    finally:
        SCALE, EPS, WEIGHTS, SETTINGS.factor, BOX[0], CountsItsCalls.calls = saved


def _set_global(name, value):
    globals()[name] = value


def _breaks(fn) -> list[str]:
    capture.reset()
    with capture.observe() as seen:
        dynajit.compiler.compile(fn, backend="aot_eager")(torch.randn(3, requires_grad=True))
    return [brk.reason for brk in seen.graph_breaks]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_global_the_methods_read_is_guarded(backend):
    _differential(scaled, backend, change=lambda call: _set_global("SCALE", 2.0 + call))
    _differential(library, backend, change=lambda call: _set_global("EPS", 1e-3 * (call + 1)))
    _differential(weighted, backend, change=lambda call: _set_global("WEIGHTS", (1.0 + call, 2.0)))
    assert _breaks(scaled) == [] and _breaks(library) == [] and _breaks(weighted) == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn", [logged, through_vjp, counted, appends], ids=["global_list", "vjp", "class_attribute", "list_argument"]
)
def test_methods_with_effects_run_as_often_as_in_eager(fn, backend):
    _differential(fn, backend)
    assert len(_breaks(fn)) == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_module_attribute_or_a_closure_variable_the_methods_read_is_never_stale(backend):
    _differential(settings, backend, change=lambda call: setattr(SETTINGS, "factor", 3.0 + call))
    _differential(from_closure, backend, change=lambda call: BOX.__setitem__(0, 2.0 + call))


@pytest.mark.parametrize("backend", BACKENDS)
def test_helpers_the_methods_call_are_read_and_guarded_too(backend):
    assert _breaks(swish) == []
    _differential(swish, backend, change=lambda call: _set_global("SCALE", 2.0 + call))
    original = swish_forward
    try:
        _differential(swish, backend, change=lambda call: _set_global("swish_forward", lambda x: x * call))
        _differential(swish, backend, change=lambda call: setattr(original, "__defaults__", (0.5 * call,)))
    finally:
        _set_global("swish_forward", original)
        original.__defaults__ = (0.0,)


def test_the_reason_names_the_function_and_what_it_reads():
    (reason,) = _breaks(settings)
    assert "ReadsSettings.forward reads module settings" in reason, reason
    (reason,) = _breaks(from_closure)
    assert "FromClosure.forward reads variables of an enclosing function (box)" in reason, reason
    (reason,) = _breaks(logged)
    assert "Logged.forward reads global EVENTS (list)" in reason, reason
    (reason,) = _breaks(appends)
    assert "AppendsToItsArgument called with ListVar" in reason or "called with [" in reason, reason


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_method_changing_process_state_runs_in_python(backend):
    capture.reset()
    compiled = dynajit.compiler.compile(reseeds, backend=backend)
    for _ in range(2):
        x = torch.ones(3, requires_grad=True)
        expected, after_eager = reseeds(x), torch.rand(4)
        actual, after_compiled = compiled(x), torch.rand(4)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(after_compiled, after_eager)  # the RNG was reseeded on every call
    (reason,) = _breaks(reseeds)
    assert "manual_seed(), which changes state" in reason, reason
    (reason,) = _breaks(prints)
    assert "builtins.print(), which changes state" in reason, reason


def test_a_builtin_shadowed_by_a_global_later_recompiles():
    try:
        _differential(library, "aot_eager", change=lambda call: _set_global("abs", lambda v: 1.0) if call else None)
    finally:
        globals().pop("abs", None)
