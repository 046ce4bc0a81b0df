"""Differential checking: run a function eagerly and through compile_fx on the same inputs."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from dynajit.inductor_lite import compile_fx


def compiled(fn: Any, *inputs: Any, **kwargs: Any) -> Any:
    gm = fn if isinstance(fn, torch.fx.GraphModule) else torch.fx.symbolic_trace(fn)
    return compile_fx(gm, list(inputs), **kwargs)


def check(fn: Any, *inputs: Any, atol: float | None = None, rtol: float | None = None, **kwargs: Any) -> Any:
    """Compile ``fn``, call it and eager on clones of ``inputs``, and compare values, dtypes and shapes."""
    expected = fn(*[i.clone() if isinstance(i, torch.Tensor) else i for i in inputs])
    c = compiled(fn, *inputs, **kwargs)
    actual = c(*[i.clone() if isinstance(i, torch.Tensor) else i for i in inputs])
    if isinstance(expected, torch.Tensor):
        expected, actual = [expected], list(actual) if isinstance(actual, (list, tuple)) else [actual]
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True)
    return c
