"""The generated dispatcher and the code cache: binding, hits and misses, order, backends, recompiles, limits."""

from __future__ import annotations

import logging
import types
import warnings

import pytest
import torch
from test_rt_support import converter_fixture, eager_backend  # noqa: F401  (the converter fixture)

import dynajit.capture as capture
from dynajit.capture import _cache, _cache_limits, _runtime
from dynajit.capture.testing import CompileCounter


def compiled_state(fn):
    return fn._dynajit_compiled


def test_dispatcher_binds_defaults_kwargs_varargs_and_varkw_like_python(converter) -> None:
    def f(a, b=2, *rest, c, d=4, **extra):
        return a * b + sum(rest) + c * d + sum(extra.values())

    compiled = capture.optimize(eager_backend)(f)
    x = torch.ones(2)
    calls = [((x,), {"c": 3}), ((x, 5, 6, 7), {"c": 1, "e": 10}), ((x,), {"b": 3, "c": 1, "d": 2, "z": 1})]
    for args, kwargs in calls:
        torch.testing.assert_close(compiled(*args, **kwargs), f(*args, **kwargs))
    # the converter receives values in co_varnames order: positional, keyword-only, *args, **kwargs
    first = converter.conversions[0]
    assert first.values[1:] == (2, 3, 4, (), {})
    assert first.values[0] is x
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'c'"):
        compiled(x)
    with pytest.raises(TypeError) as compiled_error:
        compiled(x, b=1, a=2, c=3)
    with pytest.raises(TypeError) as eager_error:
        f(x, b=1, a=2, c=3)
    assert str(compiled_error.value).split("()")[-1] == str(eager_error.value).split("()")[-1]
    assert compiled.__name__ == "f" and compiled.__wrapped__ is f


def test_positional_only_and_keyword_only_signatures(converter) -> None:
    def g(a, /, b, *, scale=2.0):
        return (a + b) * scale

    compiled = capture.optimize(eager_backend)(g)
    x, y = torch.ones(3), torch.full((3,), 2.0)
    torch.testing.assert_close(compiled(x, b=y), g(x, b=y))
    torch.testing.assert_close(compiled(x, y, scale=3.0), g(x, y, scale=3.0))
    with pytest.raises(TypeError):
        compiled(a=x, b=y)


def test_hit_runs_the_transformed_code_and_miss_converts_once_per_guard_set(converter) -> None:
    def h(x):
        return x * 2

    compiled = capture.optimize(eager_backend)(h)
    for _ in range(3):
        torch.testing.assert_close(compiled(torch.ones(4)), torch.full((4,), 2.0))
    assert converter.names() == ["h"]
    assert converter.conversions[0].runs == 3
    compiled(torch.ones(4, dtype=torch.float64))
    assert converter.names() == ["h", "h"]
    compiled(torch.ones(4))
    assert [c.runs for c in converter.conversions] == [4, 1]


def test_entries_are_tried_most_recent_first(converter) -> None:
    def m(x):
        return x + 1

    compiled = capture.optimize(eager_backend)(m)
    for dtype in (torch.float32, torch.float64, torch.float16):
        compiled(torch.ones(2, dtype=dtype))
    entries = compiled_state(compiled).entries()
    assert [e.guards.expected["x"][1][0] for e in entries] == [torch.float16, torch.float64, torch.float32]
    source = compiled_state(compiled).source
    assert source.index("g0(") < source.index("g1(") < source.index("g2(")
    checks_before = [e.guards.compiled[0].checks for e in entries]
    compiled(torch.ones(2, dtype=torch.float16))
    checks_after = [e.guards.compiled[0].checks for e in entries]
    assert [b - a for a, b in zip(checks_before, checks_after)] == [1, 0, 0]


def test_cache_is_per_backend_and_shared_by_wrappers_of_the_same_code(converter) -> None:
    def k(x):
        return x - 1

    first, second = CompileCounter(), CompileCounter()
    x = torch.ones(3)
    capture.optimize(first)(k)(x)
    capture.optimize(second)(k)(x)
    assert (first.frame_count, second.frame_count) == (1, 1)
    again = capture.optimize(first)(k)  # a new wrapper for the first backend reuses its entry
    again(x)
    again(x)
    assert first.frame_count == 1 and converter.names() == ["k", "k"]
    assert len(_cache.cache_for(k.__code__).entries) == 2


def test_recompile_logs_the_failed_guard(converter, caplog: pytest.LogCaptureFixture) -> None:
    def r(x):
        return x.sum()

    compiled = capture.optimize(eager_backend)(r)
    compiled(torch.ones(2))
    with caplog.at_level(logging.INFO, logger="dynajit.recompiles"):
        compiled(torch.ones(2, dtype=torch.float64))
    text = "\n".join(record.getMessage() for record in caplog.records if record.name == "dynajit.recompiles")
    assert "Recompiling function test_recompile_logs_the_failed_guard.<locals>.r" in text
    assert "tensor 'x' dtype float32 -> float64" in text


def test_guards_log_prints_one_guard_per_line(converter, caplog: pytest.LogCaptureFixture) -> None:
    def s(a, n):
        return a * n

    with caplog.at_level(logging.INFO, logger="dynajit.guards"):
        capture.optimize(eager_backend)(s)(torch.ones(2), 3)
    (record,) = [r for r in caplog.records if r.name == "dynajit.guards"]
    assert record.getMessage().splitlines()[:3] == ["GUARDS:", "- local 'a' TENSOR_MATCH", "- local 'n' CONSTANT_MATCH"]


def test_cache_size_limit_runs_eagerly_with_one_warning(converter, monkeypatch: pytest.MonkeyPatch) -> None:
    def lim(x, n):
        return x + n

    collections = []
    monkeypatch.setattr(_cache_limits.gc, "collect", lambda *args: collections.append(args))
    compiled = capture.optimize(eager_backend)(lim)
    x = torch.zeros(2)
    # strict=False: this test checks the non-strict fallback itself (test_rt_strict covers strict mode)
    with capture.config.patch(cache_size_limit=3, strict=False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [compiled(x, n) for n in range(6)]
    assert converter.names() == ["lim"] * 3
    for n, result in enumerate(results):
        torch.testing.assert_close(result, x + n)
    limit_warnings = [w for w in caught if issubclass(w.category, capture.RecompileLimitWarning)]
    assert len(limit_warnings) == 1
    message = str(limit_warnings[0].message)
    assert "cache_size_limit (3)" in message and "cache_size_limit = N" in message and "'n' == 2" in message
    assert limit_warnings[0].filename == __file__
    full = [args for args in collections if args != (1,)]  # (1,): the young collection after each compile
    assert full == [], "one backend only: nothing to collect before running eagerly"


def test_skip_frame_caches_an_entry_that_runs_the_original(converter) -> None:
    def plain(x):
        return x

    converter.skip["plain"] = "no tensor operations"
    compiled = capture.optimize(eager_backend)(plain)
    for _ in range(3):
        assert compiled(5) == 5
    assert converter.names() == ["plain"]
    (entry,) = compiled_state(compiled).entries()
    assert entry.kind == "skip" and entry.reason == "no tensor operations"


def test_guarded_skip_frame_recompiles_when_its_guards_fail(converter) -> None:
    def gskip(x):
        return x

    converter.skip["gskip"] = "nothing to do"
    converter.skip_guarded.add("gskip")
    compiled = capture.optimize(eager_backend)(gskip)
    compiled(1)
    compiled(1)
    compiled(2)
    assert converter.names() == ["gskip", "gskip"]


def test_internal_error_runs_eagerly_warns_and_leaves_no_broken_entry(converter) -> None:
    def broken(x):
        return x * 3

    converter.error["broken"] = KeyError("converter bug")
    compiled = capture.optimize(eager_backend)(broken)
    x = torch.ones(2)
    # strict=False: this test checks the non-strict fallback itself (test_rt_strict covers strict mode)
    with capture.config.patch(strict=False):
        with pytest.warns(RuntimeWarning, match=r"converter bug.*internal error or a failure of the backend"):
            torch.testing.assert_close(compiled(x), x * 3)
        torch.testing.assert_close(compiled(x), x * 3)
    assert converter.names() == ["broken"]
    (entry,) = compiled_state(compiled).entries()
    assert entry.kind == "eager" and entry.guards is None
    assert not any(name.startswith("__rt_") for name in broken.__globals__)


def test_internal_error_under_fullgraph_raises(converter) -> None:
    def broken_full(x):
        return x

    converter.error["broken_full"] = ValueError("converter bug")
    compiled = capture.optimize(eager_backend, fullgraph=True)(broken_full)
    with pytest.raises(capture.InternalCompilerError, match="converter bug") as info:
        compiled(torch.ones(1))
    assert isinstance(info.value.__cause__, ValueError)
    assert compiled_state(compiled).entries() == []


def test_fullgraph_graph_break_raises_unsupported_with_reason(converter) -> None:
    from dynajit.capture._frame import Unsupported

    def breaks(x):
        return x

    converter.unsupported["breaks"] = "data-dependent branch"
    with pytest.raises(Unsupported, match="data-dependent branch"):
        capture.optimize_assert(eager_backend)(breaks)(torch.ones(1))


def test_user_exceptions_from_compiled_code_propagate_unchanged(converter) -> None:
    def raises(x):
        raise ValueError(f"bad input {x}")

    with pytest.raises(ValueError, match="bad input 3"):
        capture.optimize(eager_backend)(raises)(3)


def test_methods_bound_and_unbound_and_modules(converter) -> None:
    class Scale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.full((2,), 3.0))

        def forward(self, x):
            return x * self.w

    mod = Scale()
    x = torch.ones(2)
    torch.testing.assert_close(capture.optimize(eager_backend)(mod)(x), mod(x))
    torch.testing.assert_close(capture.optimize(eager_backend)(mod.forward)(x), mod(x))

    class Holder:
        factor = 2

        @capture.optimize(eager_backend)
        def apply(self, x):
            return x * self.factor

    torch.testing.assert_close(Holder().apply(x), x * 2)
    assert converter.names() == ["forward", "apply"]


def test_reset_forgets_entries_and_wrappers_recompile(converter) -> None:
    def again(x):
        return x + 2

    compiled = capture.optimize(eager_backend)(again)
    compiled(torch.ones(1))
    capture.reset()
    assert compiled_state(compiled).entries() == []
    compiled(torch.ones(1))
    assert converter.names() == ["again", "again"]


def test_closures_with_the_same_code_share_the_cache_but_run_their_own_cells(converter) -> None:
    def make(scale):
        def scaled(x):
            return x * scale

        return scaled

    double, triple = make(2), make(3)
    x = torch.ones(2)
    torch.testing.assert_close(capture.optimize(eager_backend)(double)(x), x * 2)
    torch.testing.assert_close(capture.optimize(eager_backend)(triple)(x), x * 3)


def test_optimize_rejects_bad_arguments() -> None:
    with pytest.raises(TypeError, match="backend callable"):
        capture.optimize("eager")
    with pytest.raises(TypeError, match=r"function, method, nn\.Module or other callable, got int 3"):
        capture.optimize(eager_backend)(3)
    with pytest.raises(TypeError, match="dynamic"):
        capture.optimize(eager_backend, dynamic="yes")


def test_entries_of_backends_no_wrapper_uses_do_not_count_against_the_limit(converter) -> None:
    def fresh(x):
        return x * 4

    x = torch.ones(2)
    with capture.config.patch(cache_size_limit=2), warnings.catch_warnings():
        warnings.simplefilter("error")  # no limit warning may be raised
        for _ in range(4):
            capture.optimize(CompileCounter())(fresh)(x)  # a throwaway backend each time, as explain does
    assert converter.names() == ["fresh"] * 4
    assert len(_cache.cache_for(fresh.__code__).entries) <= 2


def test_compiling_a_compiled_function_compiles_its_original(converter) -> None:
    def base(x):
        return x + 5

    first = capture.optimize(eager_backend)(base)
    second = capture.optimize(CompileCounter())(first)
    assert second.__wrapped__ is base and capture.intercept(first) is first
    assert _runtime.original_of(first) is base and _runtime.original_of(base) is None
    holder = types.SimpleNamespace()
    bound = types.MethodType(first, holder)
    assert _runtime.original_of(bound).__func__ is base and _runtime.original_of(bound).__self__ is holder
    torch.testing.assert_close(second(torch.zeros(1)), torch.full((1,), 5.0))
    assert converter.conversions[0].fn is base


def test_running_backend_is_per_thread(converter) -> None:
    import threading

    seen: dict[str, object] = {}
    barrier = threading.Barrier(2)

    def report(x, name):
        barrier.wait(timeout=10)  # both threads are inside their compiled call
        seen[name] = capture.current_backend()
        return x

    backends = {"a": CompileCounter(), "b": CompileCounter()}
    compiled = {name: capture.optimize(backend)(report) for name, backend in backends.items()}
    for name in backends:  # compile both entries first, so the threads only run them
        barrier_saved, barrier = barrier, threading.Barrier(1)
        compiled[name](torch.ones(1), name)
        barrier = barrier_saved
    threads = [threading.Thread(target=compiled[name], args=(torch.ones(1), name)) for name in backends]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert seen == backends


def test_an_entry_another_wrapper_cannot_bind_is_skipped_with_a_warning(converter) -> None:
    def shared(x):
        return x + 7

    x = torch.ones(1)
    capture.optimize(eager_backend)(shared)(x)
    (entry,) = _cache.cache_for(shared.__code__).entries

    def broken_compile(**kwargs):
        raise RuntimeError("guard compile bug")

    entry.guards.compile = broken_compile
    with pytest.warns(RuntimeWarning, match="cannot reuse compiled entry.*guard compile bug") as caught:
        second = capture.optimize(eager_backend)(shared)
        torch.testing.assert_close(second(x), x + 7)
        torch.testing.assert_close(second(x), x + 7)
    assert len(caught) == 1
    assert converter.names() == ["shared", "shared"]


def test_a_backend_that_calls_the_compiled_function_does_not_recurse(converter) -> None:
    def selfish(x):
        return x * 6

    calls = []

    def backend(gm, example_inputs):
        calls.append(compiled(torch.ones(1)))  # runs eagerly: the frame is still converting
        return gm.forward

    compiled = capture.optimize(backend)(selfish)
    torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 6.0))
    assert converter.names() == ["selfish"] and len(calls) == 1


# A bad call through any generated function raises eager's TypeError, word for word (naming the user's function).


def _two(x, y, *, k=1):
    return x + y * k


def _posonly(a, /, b, *rest, scale, **extra):
    return (a + b) * scale


class _Holder:
    def method(self, x, scale=2.0):
        return x * scale


_BAD_CALLS = [
    ((), {}),
    ((1,), {}),
    ((1, 2, 3), {}),
    ((1,), {"y": 2, "z": 3}),
    ((1, 2), {"x": 3}),
    ((1, 2), {"k": 1, "scale": 2}),
    ((), {"a": 1, "b": 2, "scale": 3}),
]


def _type_error(fn, args, kwargs) -> str | None:
    try:
        fn(*args, **kwargs)
    except TypeError as error:
        return str(error)
    return None


def _generated_callers(fn):
    """Every generated function a user call can reach first: the optimize wrapper, an intercepted call, export."""
    settings = _runtime._settings(eager_backend, False, None)
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    intercepted = settings.wrapper_of(target)
    if isinstance(fn, types.MethodType):
        intercepted = types.MethodType(intercepted, fn.__self__)
    return {
        "optimize": capture.optimize(eager_backend)(fn),
        "intercept": intercepted,
        "export": capture.export(fn),
    }


@pytest.mark.parametrize("fn", [_two, _posonly, _Holder().method], ids=["function", "posonly", "method"])
def test_bad_calls_raise_the_eager_type_error(converter, fn) -> None:
    for name, caller in _generated_callers(fn).items():
        for args, kwargs in _BAD_CALLS:
            expected = _type_error(fn, args, kwargs)
            if expected is None:
                continue
            assert _type_error(caller, args, kwargs) == expected, (name, args, kwargs)
    assert not converter.conversions  # every call was rejected before reaching the cache


def test_only_entries_that_may_reach_the_interceptor_run_inside_the_settings_scope() -> None:
    def pure(x):
        return torch.sin(x) + 1

    def helper(x):
        return capture.current_backend()

    def breaks(x):
        y = torch.cos(x)
        return y, helper(y)

    backend = CompileCounter()
    compiled_pure, compiled_breaks = capture.optimize(backend)(pure), capture.optimize(backend)(breaks)
    x = torch.ones(2)
    for _ in range(2):  # the miss, then the hit through the regenerated chain
        torch.testing.assert_close(compiled_pure(x), pure(x))
        out, seen = compiled_breaks(x)
        torch.testing.assert_close(out, torch.cos(x))
        assert seen is backend  # the call at the graph break ran under the wrapper's settings
    pure_source, breaks_source = compiled_state(compiled_pure).source, compiled_state(compiled_breaks).source
    # a hit on an entry that only calls its graph sets nothing up; BACKEND_MATCH is not checked per call
    assert pure_source.split("\n")[1:4] == [
        "    if __dj_orig.__code__ is not __dj_code: return __dj_recode(x)",
        "    if __dj_g0(x,):",
        "        return __dj_f0(x)",
    ]
    assert "__dj_enter" in breaks_source.split("__dj_miss")[0]
    (_, instance), *_ = compiled_state(compiled_pure).ordered
    assert "BACKEND_MATCH" not in str(instance.guards.guards) and "BACKEND_MATCH" in str(
        compiled_state(compiled_pure).entries()[0].guards
    )
    assert capture.current_backend() is None


def test_a_function_whose_code_is_replaced_runs_its_new_code() -> None:
    # Eager runs whatever code the function holds at the call; the dispatcher was built for the old code, whose
    # guards still passed, so the compiled call kept returning the old code's answer.
    def fn(t):
        return t + 1

    backend = CompileCounter()
    compiled = capture.optimize(backend)(fn)
    x = torch.ones(2)
    assert torch.equal(compiled(x), fn(x))
    old = fn.__code__
    fn.__code__ = (lambda t, k=3: t * k).__code__
    fn.__defaults__ = (3,)
    assert torch.equal(compiled(x), fn(x))
    assert torch.equal(compiled(x, 5), fn(x, 5))
    fn.__code__, fn.__defaults__ = old, None
    assert torch.equal(compiled(x), fn(x))
    assert backend.frame_count == 3  # old code, new code at k=3 and k=5; the old entry served again after
