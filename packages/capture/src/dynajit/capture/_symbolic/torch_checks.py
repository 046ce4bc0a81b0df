"""``torch._check`` and its family: conditions known while tracing fold away, a failing one raises in Python.

A condition made of constants and sizes is a Python bool by the time the
check sees it (a comparison of symbolic sizes is decided by the ShapeEnv, which
guards the answer), so a true check adds nothing to the graph and a false one
is cut like any step that raises: Python runs the check itself and raises
eager's exception, its message callable called by torch as in eager. A
condition on a size read from tensor data (an unbacked symbol, under
``capture_scalar_outputs``) is a graph node instead: the check runs with the
graph, and the ShapeEnv learns the fact for the rest of the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.variables import VT, ConstVar, TensorVar, raises_in_python, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["TORCH_CHECKS"]

# The checks taking (cond, message=None); each raises its own error type (RuntimeError, IndexError, ...).
_PLAIN_CHECKS = (torch._check, torch._check_index, torch._check_value, torch._check_type, torch._check_not_implemented)


def _argument(args: list[VT], kwargs: dict[str, VT], index: int, name: str) -> VT | None:
    if len(args) > index:
        return args[index]
    return kwargs.get(name)


def _check(tx: Tracer, cond: VT | None, name: str) -> VT:
    """Fold the condition ``cond`` of check ``name``: nothing when true, Python raising eager's error when false."""
    if cond is None:
        raises_in_python(f"{name} is missing its condition")
    if isinstance(cond, TensorVar):
        raises_in_python(f"{name} of a tensor (a TypeError in eager)")
    node = getattr(cond, "node", None)
    if node is not None and isinstance(node.meta.get("example_value"), torch.SymBool):
        # A fact about data-dependent sizes: the graph checks it when it runs.
        tx.output.call_function(torch._check, [cond], {})
        return ConstVar(None)
    if not cond.is_const():
        unsupported(f"{name} of {cond}")
    value = cond.const()
    if type(value) is not bool:
        raises_in_python(f"{name} of a {type(value).__name__} (a TypeError in eager)")
    if not value:
        raises_in_python(f"{name} failed")
    return ConstVar(None)


def _call_check(fn: Any) -> Callable[[Tracer, list[VT], dict[str, VT]], VT]:
    def call(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return _check(tx, _argument(args, kwargs, 0, "cond"), f"torch.{fn.__name__}")

    return call


def _check_with(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    error = _argument(args, kwargs, 0, "error_type")
    if error is None or not error.is_const() or not isinstance(error.const(), type):
        raises_in_python("torch._check_with needs an exception class")
    return _check(tx, _argument(args, kwargs, 1, "cond"), "torch._check_with")


def _check_is_size(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``_check_is_size(i, message=None, *, max=None)``: ``0 <= i`` (and ``i <= max``)."""
    from dynajit.capture._symbolic.variables.symbolic import SymIntVar

    size = _argument(args, kwargs, 0, "i")
    bound = kwargs.get("max")
    if isinstance(size, SymIntVar) and _is_unbacked(size.example):
        # A size read from data: the graph checks it and the ShapeEnv learns it is a size.
        message = _argument(args, kwargs, 1, "message")
        if message is not None and not message.is_const():
            unsupported("torch._check_is_size of a data-dependent size with a message callable")
        tx.output.call_function(torch._check_is_size, [size], {k: v for k, v in kwargs.items() if k == "max"})
        return ConstVar(None)
    if size is None or not (size.is_const() or isinstance(size, SymIntVar)):
        unsupported(f"torch._check_is_size of {size}")
    value = size.example if isinstance(size, SymIntVar) else size.const()
    if not isinstance(value, (int, torch.SymInt)) or isinstance(value, bool):
        raises_in_python("torch._check_is_size of a non-integer")
    holds = bool(value >= 0)
    if bound is not None:
        holds = holds and bool(value <= bound.const())
    if not holds:
        raises_in_python("torch._check_is_size failed")
    return ConstVar(None)


def _check_tensor_all(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    unsupported("torch._check_tensor_all reads the tensor's data")


def _is_unbacked(value: Any) -> bool:
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return isinstance(value, torch.SymInt) and bool(free_unbacked_symbols(value))


#: torch's check functions and how the interpreter calls each.
TORCH_CHECKS: dict[Any, Callable[[Tracer, list[VT], dict[str, VT]], VT]] = {
    **{fn: _call_check(fn) for fn in _PLAIN_CHECKS},
    torch._check_with: _check_with,
    torch._check_is_size: _check_is_size,
    torch._check_tensor_all: _check_tensor_all,
    torch._check_tensor_all_with: _check_tensor_all,
}
