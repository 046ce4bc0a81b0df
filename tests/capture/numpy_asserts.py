"""The differential check for NumPy code: eager vs compiled, comparing ndarrays by type, dtype, shape and values."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def copy_args(value: Any) -> Any:
    """ndarrays and tensors copied, containers rebuilt; everything else shared."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, torch.Tensor):
        return value.clone()
    if type(value) in (list, tuple):
        return type(value)(copy_args(v) for v in value)
    return value


def assert_same_numpy(actual: Any, expected: Any, what: str = "result") -> None:
    """The same type (ndarray, NumPy scalar, tensor, ...), dtype, shape, strides and values."""
    assert type(actual) is type(expected), f"{what}: expected {type(expected).__name__}, got {type(actual).__name__}"
    if isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
        if expected.dtype.kind in "fc":
            # Half precision: torch._numpy may round once where NumPy rounds at another step.
            tolerance = 2e-3 if expected.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(actual, expected, rtol=tolerance, atol=tolerance, err_msg=what)
        else:
            np.testing.assert_array_equal(actual, expected, err_msg=what)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{what}: {m}")
    elif isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{what}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same_numpy(a, e, f"{what}[{i}]")
    else:
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"


def check_numpy(
    fn: Callable[..., Any], *args: Any, graphs: int | None = 1, fullgraph: bool = True, calls: int = 1
) -> CompileCounter:
    """Run ``fn`` eagerly and compiled on copies of ``args``; compare results, raised errors and the arguments."""
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=fullgraph)(fn)
    for _ in range(calls):
        eager_args, compiled_args = copy_args(args), copy_args(args)
        try:
            expected, expected_exc = fn(*eager_args), None
        except Exception as exc:
            expected, expected_exc = None, exc
        try:
            actual, actual_exc = compiled(*compiled_args), None
        except Exception as exc:
            if expected_exc is None:
                raise
            actual, actual_exc = None, exc
        if expected_exc is not None:
            assert type(actual_exc) is type(expected_exc), f"eager raised {expected_exc!r}, compiled {actual_exc!r}"
        else:
            assert_same_numpy(actual, expected)
        assert_same_numpy(list(compiled_args), list(eager_args), "arguments after the call")
    if graphs is not None:
        assert counter.frame_count == graphs, f"expected {graphs} graphs, compiled {counter.frame_count}"
    return counter


def break_reasons(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The reasons of the graph breaks compiling ``fn`` on ``args`` meets (the result checked against eager).

    ``fn`` must not write into its arguments: both runs see the same objects (a copy would lose their flags).
    """
    capture.reset()
    # Not strict: a break before any operation leaves nothing to compile, and the frame rightly runs eagerly.
    with capture.config.patch(strict=False), warnings.catch_warnings(), capture.observe() as seen:
        warnings.simplefilter("ignore", RuntimeWarning)
        actual = capture.optimize(CompileCounter())(fn)(*args)
    assert_same_numpy(actual, fn(*args))
    reasons = [brk.reason for frame in seen.frames for brk in frame.graph_breaks]
    return reasons + [frame.reason for frame in seen.frames if frame.reason]
