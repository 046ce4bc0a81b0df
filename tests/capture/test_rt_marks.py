"""Marks on functions and tensors, the compiling flags, the stance, and CompileCounter."""

from __future__ import annotations

import pytest
import torch
from test_rt_support import converter_fixture, eager_backend  # noqa: F401  (the converter fixture)

import dynajit.capture as capture
from dynajit.capture import _marks
from dynajit.capture.testing import CompileCounter, CompileCounterWithBackend


def test_function_marks_are_recorded_without_changing_the_function() -> None:
    def f(x):
        return x

    def g(x):
        return x

    assert capture.allow_in_graph(f) is f and _marks.is_allowed_in_graph(f)
    assert capture.disallow_in_graph(f) is f and _marks.is_disallowed_in_graph(f) and not _marks.is_allowed_in_graph(f)
    assert capture.nonstrict_trace(g) is g and _marks.is_nonstrict_traced(g)
    assert capture.assume_constant_result(g) is g and _marks.has_constant_result(g)
    assert not _marks.is_allowed_in_graph(g) and not capture.is_disabled(g)
    assert capture.allow_in_graph([f, g]) == [f, g] and _marks.is_allowed_in_graph(g)
    assert capture.graph_break() is None
    with pytest.raises(TypeError, match="expects a function"):
        capture.allow_in_graph(3)


def test_disable_marks_methods_modules_and_frames() -> None:
    class M(torch.nn.Module):
        def forward(self, x):
            return x

    class Other(torch.nn.Module):
        @capture.disable
        def forward(self, x):
            return x

    m = M()
    assert capture.disable(m) is m and capture.is_disabled(m) and not capture.is_disabled(M())
    assert capture.is_disabled(Other()) and capture.is_disabled(Other().forward)

    def shallow(x):
        return x

    capture.disable(shallow, recursive=False)
    assert _marks.is_disabled_frame_only(shallow) and not capture.is_disabled(shallow)
    capture.disable(shallow)
    assert capture.is_disabled(shallow) and not _marks.is_disabled_frame_only(shallow)


def test_substitute_in_graph_registers_and_runs_the_original_eagerly() -> None:
    calls = []

    def original(x, y=1):
        calls.append("original")
        return x + y

    @capture.substitute_in_graph(original, can_constant_fold_through=True)
    def polyfill(x, y=1):
        calls.append("polyfill")
        return x + y

    assert polyfill(2) == 3 and calls == ["original"]
    assert _marks.substitute_for(original).__name__ == "polyfill"
    assert _marks.substitute_for(polyfill) is not None and _marks.can_constant_fold_through(original)
    with pytest.raises(ValueError, match="already has a substitute"):
        capture.substitute_in_graph(original)
    with pytest.raises(TypeError, match="signature"):

        def other(a):
            return a

        @capture.substitute_in_graph(other)
        def wrong(a, b):
            return a


def test_compiling_flags_are_false_eagerly_and_true_while_converting(converter) -> None:
    assert (capture.is_compiling(), capture.is_dynamo_compiling(), capture.is_exporting()) == (False, False, False)

    def f(x):
        return x

    capture.optimize(eager_backend)(f)(torch.ones(1))  # the fake converter asserts is_compiling()
    assert converter.names() == ["f"] and not capture.is_compiling()


def test_tensor_marks_are_recorded_on_the_tensor() -> None:
    t = torch.zeros(2, 3, 4)
    capture.mark_dynamic(t, 0)
    capture.mark_dynamic(t, [-1], min=2, max=16)
    assert _marks.dynamic_dims(t) == {0: (None, None), 2: (2, 16)}
    capture.maybe_mark_dynamic(t, 1)
    assert _marks.weak_dynamic_dims(t) == {1}
    capture.mark_static(t, 0)
    assert _marks.static_dims(t) == {0} and 0 not in _marks.dynamic_dims(t)
    capture.mark_static_address(t, guard=False)
    assert _marks.static_address_kind(t) == "unguarded"
    with pytest.raises(IndexError, match="out of range"):
        capture.mark_dynamic(t, 3)
    with pytest.raises(ValueError, match="larger than max"):
        capture.mark_dynamic(t, 0, min=5, max=2)
    with pytest.raises(TypeError, match="expects a tensor"):
        capture.mark_dynamic([1, 2], 0)
    m = torch.nn.Linear(1, 1)
    capture.mark_static(m)
    assert _marks.is_marked_static(m) and _marks.dynamic_dims(torch.zeros(1)) == {}


def test_set_stance_call_context_and_decorator(converter) -> None:
    from dynajit.capture._stance import current_stance

    def f(x):
        return x * 2

    compiled = capture.optimize(eager_backend)(f)
    x = torch.ones(1)
    with capture.set_stance("force_eager"):
        assert current_stance() == "force_eager"
        torch.testing.assert_close(compiled(x), x * 2)
    assert current_stance() == "default" and converter.names() == []

    @capture.set_stance("force_eager")
    def run_eagerly():
        return current_stance(), compiled(x)

    assert current_stance() == "default"
    assert run_eagerly()[0] == "force_eager" and converter.names() == []
    capture.set_stance("force_eager")
    try:
        compiled(x)
        assert converter.names() == []
    finally:
        capture.set_stance("default")
    compiled(x)
    assert converter.names() == ["f"]
    with pytest.raises(ValueError, match=r"unknown stance 'sometimes'.*force_eager"):
        capture.set_stance("sometimes")


def test_eager_and_fail_on_recompile_stances(converter) -> None:
    def f(x):
        return x + 1

    compiled = capture.optimize(eager_backend)(f)
    compiled(torch.ones(1))
    with capture.set_stance("eager_on_recompile"):
        torch.testing.assert_close(compiled(torch.ones(2)), torch.full((2,), 2.0))
        compiled(torch.ones(1))
    assert converter.names() == ["f"]
    with capture.set_stance("fail_on_recompile"):
        compiled(torch.ones(1))
        with pytest.raises(capture.RecompileError, match="tensor 'x' size"):
            compiled(torch.ones(3))
    compiled(torch.ones(3))
    assert converter.names() == ["f", "f"]


def test_compile_counter_counts_graphs_and_ops() -> None:
    def f(x):
        return torch.relu(x).sum() + x.mean()

    counter = CompileCounter()
    gm = torch.fx.symbolic_trace(f)
    run = counter(gm, [torch.ones(2)])
    torch.testing.assert_close(run(torch.ones(2)), f(torch.ones(2)))
    assert (counter.frame_count, counter.op_count, counter.graphs) == (1, 4, [gm])
    counter.clear()
    assert (counter.frame_count, counter.op_count, counter.graphs) == (0, 0, [])


def test_compile_counter_with_backend_counts_and_returns_the_backends_result() -> None:
    compiled_by_backend = []

    def backend(gm, example_inputs):
        compiled_by_backend.append(gm)
        return lambda *args: ("from backend", gm(*args))

    counter = CompileCounterWithBackend(backend)
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    assert counter(gm, [torch.ones(1)])(torch.ones(1))[0] == "from backend"
    assert counter.frame_count == 1 and counter.op_count == 1 and compiled_by_backend == [gm]


def test_config_fields_and_environment_names() -> None:
    defaults = capture.config.defaults()
    assert defaults["cache_size_limit"] == 8 and defaults["inline_depth_limit"] == 24
    assert defaults["suppress_errors"] is False and defaults["automatic_dynamic_shapes"] is True
    with capture.config.patch(cache_size_limit=2):
        assert capture.config.cache_size_limit == 2
    with pytest.raises(AttributeError, match="cache_size_limit"):
        capture.config.cache_size_limt = 3


def test_public_names_are_documented() -> None:
    for name in capture.__all__:
        obj = getattr(capture, name)
        if callable(obj) and not isinstance(obj, type(capture)):
            assert (obj.__doc__ or "").strip(), f"{name} needs a docstring"
