"""Strict mode through the user surface: the suite itself runs strict, and a fallback is an error there."""

from __future__ import annotations

import warnings

import pytest
import torch

import dynajit.capture
import dynajit.compiler


def test_the_suite_runs_strict():
    assert dynajit.compiler.config.strict is True  # tests/conftest.py sets DYNAJIT_STRICT=1
    assert dynajit.compiler.StrictModeError is dynajit.capture.StrictModeError
    assert issubclass(dynajit.compiler.StrictModeError, RuntimeError)


def test_a_backend_failure_through_compile_raises_and_names_the_function():
    def no_kernels(gm, example_inputs):
        raise NotImplementedError("no kernel for aten.sin")

    def sine(x):
        return torch.sin(x) * 2

    compiled = dynajit.compiler.compile(sine, backend=no_kernels)
    with pytest.raises(dynajit.compiler.StrictModeError, match=r"'.*sine' \(.*test_strict\.py:\d+\)") as info:
        compiled(torch.ones(3))
    assert isinstance(info.value.__cause__, NotImplementedError)
    # strict=False: the documented non-strict behaviour, a warning and the eager result
    with dynajit.compiler.config.patch(strict=False), pytest.warns(RuntimeWarning, match="runs eagerly"):
        torch.testing.assert_close(compiled(torch.ones(3)), sine(torch.ones(3)))


def test_graph_breaks_are_reported_by_explain_not_raised():
    def with_break(x):
        y = torch.cos(x)
        print(end="")
        return y + 1

    x = torch.randn(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        torch.testing.assert_close(dynajit.compiler.compile(with_break, backend="inductor")(x), with_break(x))
    report = dynajit.compiler.explain(with_break)(x)
    assert report.graph_break_count == 1
