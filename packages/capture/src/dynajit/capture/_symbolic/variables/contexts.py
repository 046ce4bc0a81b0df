"""Grad-mode context managers (``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)``).

Entering one records a ``torch._C._set_grad_enabled`` node in the graph and sets
the mode for the rest of the trace (fake tensors then carry the right
``requires_grad``); leaving it records and sets the previous mode again. The
converter restores the real mode when tracing ends, however it ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.variables.base import VT, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["GRAD_MODE_CLASSES", "GradModeVar"]


def _set_grad(tx: Tracer, enabled: bool) -> None:
    tx.output.call_function(torch._C._set_grad_enabled, [ConstVar(enabled)], {})
    torch._C._set_grad_enabled(enabled)


class GradModeVar(VT):
    """A grad-mode context manager before ``with`` enters it."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def python_type(self) -> type:
        return torch.no_grad if not self.enabled else torch.enable_grad

    def enter(self, tx: Tracer) -> VT:
        """Enter the block; return the tracker of the bound ``__exit__``."""
        previous = torch.is_grad_enabled()
        _set_grad(tx, self.enabled)
        return _GradModeExit(previous)


class _GradModeExit(VT):
    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if any(not (a.is_const() and a.const() is None) for a in args):
            unsupported("leaving a grad-mode block with an exception")
        _set_grad(tx, self.previous)
        return ConstVar(None)


def _no_grad(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return GradModeVar(False)


def _enable_grad(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return GradModeVar(True)


def _set_grad_enabled(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    mode = (args[0] if args else kwargs["mode"]).const()
    return GradModeVar(bool(mode))


GRAD_MODE_CLASSES: dict[Any, Any] = {
    torch.no_grad: _no_grad,
    torch.enable_grad: _enable_grad,
    torch.set_grad_enabled: _set_grad_enabled,
}
