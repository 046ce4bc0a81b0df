"""The differential harness: run a function eagerly and compiled on the same inputs and compare everything."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _clone(value: Any) -> Any:
    """Tensors cloned, containers rebuilt, user objects deep-copied; modules and callables shared."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if type(value) in (list, tuple):
        return type(value)(_clone(v) for v in value)
    if type(value) is dict:
        return {k: _clone(v) for k, v in value.items()}
    if isinstance(value, torch.nn.Module) or callable(value) or isinstance(value, type):
        return value
    if hasattr(value, "__dict__"):
        return copy.deepcopy(value)
    return value


def assert_same(actual: Any, expected: Any, what: str = "result") -> None:
    """Equal values, dtypes and shapes for tensors; equality (and the same type) for everything else."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{what}: expected a tensor, got {type(actual).__name__}"
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{what}: {m}")
        return
    assert type(actual) is type(expected), f"{what}: expected {type(expected).__name__}, got {type(actual).__name__}"
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{what}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{what}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{what}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{what}[{key!r}]")
    elif hasattr(expected, "__dict__") and not callable(expected):
        assert_same(vars(actual), vars(expected), f"{what}.__dict__")
    else:
        assert actual == expected, f"{what}: {actual!r} != {expected!r}"


def _run(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:  # the compiled function must raise the same
        return None, exc


class Differential:
    """``check(fn, *args, graphs=n)``: eager vs compiled on cloned inputs, then the graph count."""

    def __call__(
        self,
        fn: Callable[..., Any],
        *args: Any,
        graphs: int | None = None,
        calls: int = 1,
        fullgraph: bool = False,
        kwargs: dict[str, Any] | None = None,
        make_args: Callable[[], tuple[Any, ...]] | None = None,
    ) -> CompileCounter:
        kwargs = kwargs or {}
        counter = CompileCounter()
        compiled = capture.optimize(counter, fullgraph=fullgraph)(fn)
        for _ in range(calls):
            call_args = make_args() if make_args is not None else args
            eager_args, compiled_args = _clone(call_args), _clone(call_args)
            eager_kwargs, compiled_kwargs = _clone(kwargs), _clone(kwargs)
            expected, expected_exc = _run(fn, eager_args, eager_kwargs)
            actual, actual_exc = _run(compiled, compiled_args, compiled_kwargs)
            if expected_exc is not None or actual_exc is not None:
                assert type(actual_exc) is type(expected_exc), f"eager raised {expected_exc!r}, compiled {actual_exc!r}"
                assert str(actual_exc) == str(expected_exc)
            else:
                assert_same(actual, expected)
            assert_same(list(compiled_args), list(eager_args), "arguments after the call")
            assert_same(compiled_kwargs, eager_kwargs, "keyword arguments after the call")
        if graphs is not None:
            assert counter.frame_count == graphs, f"expected {graphs} graphs, compiled {counter.frame_count}"
        return counter


@pytest.fixture
def check() -> Differential:
    """The differential check (see :class:`Differential`)."""
    capture.reset()
    return Differential()


@pytest.fixture
def t() -> Callable[..., torch.Tensor]:
    """Small random tensors, seeded per test."""
    gen = torch.Generator().manual_seed(0)

    def make(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*(shape or (4,)), generator=gen).to(dtype)

    return make
