"""Strict mode: a frame that would fall back to eager raises ``StrictModeError`` instead (and only then)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture import StrictModeError, config
from dynajit.capture.testing import CompileCounter


class BackendFailure(Exception):
    pass


def failing_backend(gm, example_inputs):
    raise BackendFailure("no kernel for this graph")


def add_one(x):
    return torch.sin(x) + 1


def test_a_failing_backend_raises_naming_the_frame_and_chaining_the_cause():
    compiled = capture.optimize(failing_backend)(add_one)
    with config.patch(strict=True), capture.observe() as seen, pytest.raises(StrictModeError) as info:
        compiled(torch.ones(3))
    message = str(info.value)
    assert "'add_one'" in message
    assert f"{add_one.__code__.co_filename}:{add_one.__code__.co_firstlineno}" in message
    assert "BackendFailure: no kernel for this graph" in message
    assert isinstance(info.value.__cause__, BackendFailure)
    assert isinstance(info.value, RuntimeError)
    assert [frame.kind for frame in seen.frames] == ["error"]
    # nothing was cached: the next call tries again and raises again, never runs eagerly
    with config.patch(strict=True), pytest.raises(StrictModeError):
        compiled(torch.ones(3))


def test_without_strict_a_failing_backend_still_runs_eagerly_with_a_warning():
    compiled = capture.optimize(failing_backend)(add_one)
    x = torch.randn(3)
    with config.patch(strict=False), pytest.warns(RuntimeWarning, match="runs eagerly"):
        result = compiled(x)
    torch.testing.assert_close(result, add_one(x))


def test_an_internal_conversion_error_raises(monkeypatch):
    from dynajit.capture import _convert

    def broken(fn, args, ctx):
        raise KeyError("internal state")

    monkeypatch.setattr(_convert, "convert_frame", broken)
    compiled = capture.optimize(CompileCounter())(add_one)
    with config.patch(strict=True), pytest.raises(StrictModeError, match="KeyError") as info:
        compiled(torch.ones(3))
    assert isinstance(info.value.__cause__, KeyError)


def test_suppress_errors_under_fullgraph_does_not_hide_a_failure_in_strict_mode():
    compiled = capture.optimize(failing_backend, fullgraph=True)(add_one)
    with config.patch(strict=True, suppress_errors=True), pytest.raises(StrictModeError):
        compiled(torch.ones(3))
    # fullgraph alone keeps raising InternalCompilerError, strict or not
    with config.patch(strict=True), pytest.raises(capture.InternalCompilerError):
        compiled(torch.ones(3))


def test_the_cache_size_limit_raises_in_strict_mode_and_warns_otherwise():
    counter = CompileCounter()

    def scale(x, k):
        return x * k

    compiled = capture.optimize(counter, dynamic=False)(scale)
    with config.patch(cache_size_limit=2, strict=True):
        compiled(torch.ones(2), 2)
        compiled(torch.ones(2), 3)
        with capture.observe() as seen, pytest.raises(StrictModeError, match=r"cache_size_limit \(2\)") as info:
            compiled(torch.ones(2), 4)
    assert "'test_the_cache_size_limit_raises_in_strict_mode_and_warns_otherwise.<locals>.scale'" in str(info.value)
    assert [frame.kind for frame in seen.frames] == ["error"]
    with config.patch(cache_size_limit=2, strict=False), pytest.warns(capture.RecompileLimitWarning):
        assert torch.equal(compiled(torch.ones(2), 4), scale(torch.ones(2), 4))
    assert counter.frame_count == 2


def test_graph_breaks_are_not_fallbacks():
    counter = CompileCounter()

    def f(x):
        y = x + 1
        capture.graph_break()
        return y * 2

    x = torch.randn(3)
    with config.patch(strict=True), warnings.catch_warnings():
        warnings.simplefilter("error")
        result = capture.optimize(counter)(f)(x)
    torch.testing.assert_close(result, f(x))
    assert counter.frame_count == 2


def test_the_environment_turns_strict_mode_on():
    code = "import dynajit.capture as c; print(c.config.strict)"
    for value, expected in (("1", "True"), ("0", "False")):
        env = {**os.environ, "DYNAJIT_STRICT": value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected


def _size_after_a_branch(x):
    y = x * 3 if x.max() > 1 else x + 1
    return y.size(0)


@pytest.mark.parametrize(
    "fn",
    [_size_after_a_branch, lambda x: x.stride(1) + 1, lambda x: (x * 2, x.size(2)), lambda x: x.size("a")],
    ids=["size_after_a_branch", "stride", "size_with_an_output", "size_by_name"],
)
def test_a_tensor_method_that_raises_in_eager_raises_the_same_in_strict_mode(fn):
    # Not a failure to compile: eager raises the same error on every call the entry accepts (the rank and the
    # arguments are guarded), so the step runs in Python and raises there.
    compiled = capture.optimize(CompileCounter())(fn)
    for x in (torch.tensor(0.5), torch.tensor(2.0)):
        with pytest.raises(Exception) as expected:
            fn(x)
        with config.patch(strict=True), pytest.raises(type(expected.value)) as actual:
            compiled(x)
        assert str(actual.value) == str(expected.value)
