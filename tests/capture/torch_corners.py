"""Differential runs for tensor state: results, and each argument's value, grad, requires_grad and own attributes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def assert_same_tensor(actual: Any, expected: Any, what: str) -> None:
    """Equal values, dtypes, shapes and requires_grad; for tensors also their .grad and __dict__."""
    if not isinstance(expected, torch.Tensor):
        assert type(actual) is type(expected), f"{what}: {type(actual).__name__} != {type(expected).__name__}"
        if isinstance(expected, (list, tuple)):
            assert len(actual) == len(expected), f"{what}: length {len(actual)} != {len(expected)}"
            for i, (a, e) in enumerate(zip(actual, expected)):
                assert_same_tensor(a, e, f"{what}[{i}]")
        else:
            assert actual == expected, f"{what}: {actual!r} != {expected!r}"
        return
    assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
    torch.testing.assert_close(actual.detach(), expected.detach(), msg=lambda m: f"{what}: {m}")
    assert actual.requires_grad == expected.requires_grad, f"{what}: requires_grad differs"
    assert actual.is_leaf == expected.is_leaf, f"{what}: is_leaf differs"
    if expected.is_leaf:  # (a non-leaf's .grad is None, with a warning)
        assert (actual.grad is None) == (expected.grad is None), f"{what}.grad: {actual.grad} != {expected.grad}"
        if expected.grad is not None:
            torch.testing.assert_close(actual.grad, expected.grad, msg=lambda m: f"{what}.grad: {m}")
    assert set(actual.__dict__) == set(expected.__dict__), f"{what}.__dict__: {actual.__dict__} != {expected.__dict__}"
    for key, value in expected.__dict__.items():
        assert_same_tensor(actual.__dict__[key], value, f"{what}.{key}")


def run_both(
    fn: Callable[..., Any],
    make_args: Callable[[], tuple[Any, ...]],
    *,
    graphs: int | None = None,
    fullgraph: bool = False,
    backend: Callable[..., Any] | None = None,
    calls: int = 1,
    backward: bool = False,
    reset: bool = True,
) -> CompileCounter:
    """Run ``fn`` eagerly and compiled on equal fresh arguments and compare results and arguments.

    With ``backward``, the (scalar) result is also differentiated and the arguments' gradients compared.
    ``reset=False`` keeps the entries compiled so far (with the same ``backend``, a new call may reuse one).
    """
    if reset:
        capture.reset()
    counter = CompileCounter() if backend is None else backend
    compiled = capture.optimize(counter, fullgraph=fullgraph)(fn)
    for _ in range(calls):
        torch.manual_seed(0)
        eager_args = make_args()
        torch.manual_seed(0)
        compiled_args = make_args()
        expected, expected_exc = _run(fn, eager_args)
        actual, actual_exc = _run(compiled, compiled_args)
        if expected_exc is not None or actual_exc is not None:
            assert type(actual_exc) is type(expected_exc), f"eager raised {expected_exc!r}, compiled {actual_exc!r}"
            assert str(actual_exc) == str(expected_exc)
        else:
            assert_same_tensor(actual, expected, "result")
            if backward:
                expected.backward()
                actual.backward()
        assert_same_tensor(list(compiled_args), list(eager_args), "arguments")
    if graphs is not None:
        assert counter.frame_count == graphs, f"expected {graphs} graphs, compiled {counter.frame_count}"
    return counter


def _run(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args), None
    except Exception as exc:
        return None, exc


def breaks(fn: Callable[..., Any], *args: Any) -> list[str]:
    """The graph-break reasons of converting ``fn`` on ``args``."""
    from dynajit.capture._convert import convert_frame
    from dynajit.capture._frame import FrameContext

    converted = convert_frame(fn, args, FrameContext(backend=CompileCounter()))
    return [brk.reason for brk in converted.graph_breaks]
