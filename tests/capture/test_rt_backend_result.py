"""The backend contract: what a backend returns must be callable, and a backend that breaks it is named."""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture import StrictModeError, config


def returns_an_int(gm, example_inputs):
    return 3


class ReturnsNone:
    def __call__(self, gm, example_inputs):
        return None


def add_one(x):
    return x + 1


@pytest.mark.parametrize(
    ("backend", "expected"),
    [(returns_an_int, "returns_an_int returned int"), (ReturnsNone(), "ReturnsNone returned NoneType")],
)
def test_a_non_callable_result_is_an_error_naming_the_backend(backend, expected):
    compiled = capture.optimize(backend)(add_one)
    with config.patch(strict=True), pytest.raises(StrictModeError) as info:
        compiled(torch.ones(2))
    cause = info.value.__cause__
    assert isinstance(cause, TypeError)
    assert str(cause) == f"backend {expected}, not a callable"


def test_under_fullgraph_the_error_names_the_backend():
    compiled = capture.optimize(returns_an_int, fullgraph=True)(add_one)
    with pytest.raises(capture.InternalCompilerError, match="backend returns_an_int returned int, not a callable"):
        compiled(torch.ones(2))


def test_without_strict_the_frame_runs_eagerly_and_the_warning_names_the_backend():
    compiled = capture.optimize(returns_an_int)(add_one)
    x = torch.randn(2)
    # strict=False: this checks the non-strict fallback, which must not fail later at the graph's first call
    with config.patch(strict=False), pytest.warns(RuntimeWarning, match="backend returns_an_int returned int"):
        result = compiled(x)
    torch.testing.assert_close(result, add_one(x))
    torch.testing.assert_close(compiled(x), add_one(x))
