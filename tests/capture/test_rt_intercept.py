"""Interception: compiled code routes calls to user functions through their compiled wrappers."""

from __future__ import annotations

import math

import torch
from test_rt_support import converter_fixture, eager_backend  # noqa: F401  (the converter fixture)

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def helper(x):
    return x + 10


def test_intercept_outside_compiled_code_returns_the_object() -> None:
    assert capture.intercept(helper) is helper
    assert capture.current_backend() is None


def test_user_function_called_from_compiled_code_is_compiled_with_the_same_backend(converter) -> None:
    seen = {}

    def outer(x):
        wrapped = capture.intercept(helper)
        seen["wrapped"] = wrapped
        seen["backend"] = capture.current_backend()
        return wrapped(x) * 2

    backend = CompileCounter()
    x = torch.ones(2)
    expected = outer(x)
    compiled = capture.optimize(backend)(outer)
    torch.testing.assert_close(compiled(x), expected)
    assert converter.names() == ["outer", "helper"]
    assert all(c.ctx.backend is backend for c in converter.conversions)
    assert seen["backend"] is backend and seen["wrapped"] is not helper
    compiled(x)
    assert converter.names() == ["outer", "helper"], "the intercepted wrapper is cached"
    assert capture.current_backend() is None, "the running backend is restored after the call"


def test_intercept_leaves_library_builtin_disabled_and_generator_functions_alone(converter) -> None:
    def gen():
        yield 1

    @capture.disable
    def quiet(x):
        return x

    results = {}

    def probe(x):
        for obj in (len, math.sqrt, torch.sin, torch.nn.functional.relu, gen, quiet, int, "text"):
            results[repr(obj)] = capture.intercept(obj) is obj
        return x

    capture.optimize(eager_backend)(probe)(torch.ones(1))
    assert all(results.values()), results


def test_intercept_bound_methods_and_modules(converter) -> None:
    class Doubler(torch.nn.Module):
        def forward(self, x):
            return x * 2

    class Counter:
        def bump(self, x):
            return x + 1

    doubler, hooked, counter = Doubler(), Doubler(), Counter()
    hooked.register_forward_hook(lambda mod, args, out: out + 100)
    got = {}

    def run(x):
        got["method"] = capture.intercept(counter.bump)
        got["module"] = capture.intercept(doubler)
        got["hooked"] = capture.intercept(hooked)
        got["linear"] = capture.intercept(torch.nn.Linear(1, 1))
        return got["method"](x) + got["module"](x) + got["hooked"](x)

    x = torch.ones(2)
    torch.testing.assert_close(capture.optimize(eager_backend)(run)(x), (x + 1) + x * 2 + (x * 2 + 100))
    assert got["method"].__self__ is counter and got["method"].__func__ is not Counter.bump
    assert got["module"].__self__ is doubler
    assert got["hooked"] is hooked and isinstance(got["linear"], torch.nn.Linear)
    assert sorted(converter.names()) == ["bump", "forward", "run"]


def test_disabled_function_runs_uncompiled_and_compiling_it_gives_it_back(converter) -> None:
    @capture.disable
    def off(x):
        return x - 1

    assert capture.optimize(eager_backend)(off) is off
    assert capture.is_disabled(off)
    assert capture.optimize(eager_backend)(off)(torch.ones(1)).item() == 0
    assert converter.names() == []


def test_frame_only_disable_still_compiles_through_interception(converter) -> None:
    def inner(x):
        return x * 5

    @capture.disable(recursive=False)
    def shallow(x):
        return capture.intercept(inner)(x)

    from dynajit.capture import _marks

    assert _marks.is_disabled_frame_only(shallow) and not capture.is_disabled(shallow)
    compiled = capture.optimize(eager_backend)(shallow)
    torch.testing.assert_close(compiled(torch.ones(1)), torch.full((1,), 5.0))
    # the runtime hands the frame to the converter, which leaves it untraced; its callee is intercepted
    assert converter.names() == ["shallow", "inner"]


def test_user_objects_with_a_python_call_method_are_intercepted(converter) -> None:
    class Affine:
        def __init__(self, scale):
            self.scale = scale

        def __call__(self, x):
            return x * self.scale

    affine = Affine(3.0)
    got = {}

    def use(x):
        got["call"] = capture.intercept(affine)
        got["class"] = capture.intercept(Affine)
        return got["call"](x)

    torch.testing.assert_close(capture.optimize(eager_backend)(use)(torch.ones(2)), torch.full((2,), 3.0))
    assert got["call"].__self__ is affine and got["class"] is Affine
    assert converter.names() == ["use", "__call__"]


def test_intercepted_closures_are_forgotten_when_they_die(converter) -> None:
    import gc

    from dynajit.capture import _runtime

    def make(k):
        def adder(x):
            return x + k

        return adder

    settings = {}

    def run(x):
        settings["running"] = _runtime._running_settings()
        for k in range(5):
            x = capture.intercept(make(k))(x)  # a fresh closure each time
        return x

    torch.testing.assert_close(capture.optimize(eager_backend)(run)(torch.zeros(1)), torch.full((1,), 10.0))
    gc.collect()
    assert len(settings["running"].intercepted._items) == 0
    assert converter.names() == ["run", "adder"], "closures of one code share its cache (the double ignores cells)"


def test_partials_and_modules_overriding_call_are_intercepted(converter) -> None:
    import functools

    class Custom(torch.nn.Module):
        def forward(self, x):
            return x * 100

        def __call__(self, x):  # its own call logic: must run instead of forward alone
            return self.forward(x) + 1

    custom = Custom()

    def power(x, exponent):
        return x**exponent

    got = {}

    def use(x):
        got["partial"] = capture.intercept(functools.partial(power, exponent=2))
        got["custom"] = capture.intercept(custom)
        got["builtin_partial"] = capture.intercept(functools.partial(max, 0))
        return got["partial"](x) + got["custom"](x)

    x = torch.full((2,), 3.0)
    torch.testing.assert_close(capture.optimize(eager_backend)(use)(x), x**2 + x * 100 + 1)
    assert isinstance(got["partial"], functools.partial) and got["partial"].func is not power
    assert got["custom"].__self__ is custom and got["custom"].__func__ is not Custom.__call__
    assert got["builtin_partial"].func is max
    assert sorted(converter.names()) == ["__call__", "power", "use"]
