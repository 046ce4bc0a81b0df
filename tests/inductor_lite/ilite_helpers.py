"""Differential checking: run a function eagerly and through compile_fx on the same inputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.fx
from torch.fx.experimental.proxy_tensor import make_fx

from dynajit.inductor_lite import compile_fx


def compiled(fn: Any, *inputs: Any, **kwargs: Any) -> Any:
    gm = fn if isinstance(fn, torch.fx.GraphModule) else torch.fx.symbolic_trace(fn)
    return compile_fx(gm, list(inputs), **kwargs)


def _clones(inputs: Sequence[Any]) -> list[Any]:
    return [i.clone() if isinstance(i, torch.Tensor) else i for i in inputs]


def check(fn: Any, *inputs: Any, atol: float | None = None, rtol: float | None = None, **kwargs: Any) -> Any:
    """Compile ``fn``, call it and eager on clones of ``inputs``, and compare values, dtypes and shapes."""
    expected = fn(*_clones(inputs))
    c = compiled(fn, *inputs, **kwargs)
    actual = c(*_clones(inputs))
    if isinstance(expected, torch.Tensor):
        expected, actual = [expected], [actual]
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True)
    return c


def check_cases(cases: dict[str, Any], *inputs: Any, atol: float | None = None, rtol: float | None = None) -> int:
    """Compile one graph computing every case (a function of ``inputs``) and compare each output with eager.

    Every mismatch is collected and reported by case name, so grouping cases hides no failure.
    Returns the number of cases checked.
    """
    names = list(cases)

    def graph_fn(*args: Any) -> tuple[Any, ...]:
        return tuple(cases[name](*args) for name in names)

    expected = graph_fn(*_clones(inputs))
    c = compiled(make_fx(graph_fn)(*_clones(inputs)), *inputs)
    actual = c(*_clones(inputs))
    failures = []
    for name, a, e in zip(names, actual, expected):
        try:
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True)
        except AssertionError as err:
            failures.append(f"{name}: {str(err).splitlines()[0]} {err}")
    assert not failures, "\n".join(failures)
    return len(names)
