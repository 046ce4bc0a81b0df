"""Calls of ``nonstrict_trace`` functions: run them on fake tensors and put their tensor operations in the graph.

The function's Python runs once, at trace time, on the conversion's fake
tensors under a torch-function mode that records every torch function and
tensor method it calls (as ``make_fx`` does, but at the torch level, like the
rest of the graph). Python the interpreter would break on (a ``graph_break()``,
an unsupported builtin) does not matter; data-dependent Python fails on the
fake tensors and is a graph break. Inputs and outputs are pytrees of tensors
and constants; what the function reads is not guarded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode

from dynajit.capture._frame import Unsupported
from dynajit.capture._symbolic.variables import (
    VT,
    DictVar,
    ListVar,
    TensorVar,
    TupleVar,
    is_literal,
    unsupported,
)

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["call_nonstrict"]


def _to_pytree(vt: VT, name: str) -> Any:
    """A tracker as a pytree whose leaves are TensorVars and Python constants."""
    if isinstance(vt, TensorVar):
        return vt
    if isinstance(vt, (TupleVar, ListVar)):
        return vt.kind(_to_pytree(item, name) for item in vt.items)
    if isinstance(vt, DictVar):
        return {k: _to_pytree(v, name) for k, v in vt.items.items()}
    if vt.is_const():
        return vt.const()
    unsupported(f"nonstrict_trace function {name} takes {vt}: inputs must be tensors, constants and containers")


def _from_pytree(tx: Tracer, value: Any, name: str) -> VT:
    if isinstance(value, VT):
        return value
    if type(value) in (tuple, list):
        items = [_from_pytree(tx, v, name) for v in value]
        return TupleVar(items) if type(value) is tuple else ListVar(items)
    if type(value) is dict:
        return DictVar({k: _from_pytree(tx, v, name) for k, v in value.items()})
    if is_literal(value):
        return tx.wrap_const(value)
    unsupported(f"nonstrict_trace function {name} returned a {type(value).__name__}: outputs must be pytrees")


def call_nonstrict(tx: Tracer, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """Run ``fn(*args, **kwargs)`` on the fake inputs, recording each torch call it makes in the graph."""
    name = getattr(fn, "__qualname__", repr(fn))
    tree = (_to_pytree(TupleVar(args), name), _to_pytree(DictVar(kwargs), name))
    recorder = _Recorder(tx, name)
    call_args, call_kwargs = pytree.tree_map_only(TensorVar, recorder.example_of, tree)
    try:
        with tx.output.fake_mode, recorder:
            result = fn(*call_args, **call_kwargs)
    except Unsupported:
        raise
    except Exception as exc:
        unsupported(f"nonstrict_trace function {name} cannot run on fake tensors ({type(exc).__name__}: {exc})")
    return _from_pytree(tx, pytree.tree_map_only(torch.Tensor, recorder.tracker_of, result), name)


class _Recorder(TorchFunctionMode):
    """Records the torch functions and tensor methods called on fake tensors it knows, as graph nodes."""

    def __init__(self, tx: Tracer, name: str) -> None:
        super().__init__()
        self.tx = tx
        self.name = name
        self.trackers: dict[int, TensorVar] = {}

    def example_of(self, vt: TensorVar) -> torch.Tensor:
        self.trackers[id(vt.example)] = vt
        return vt.example

    def tracker_of(self, tensor: torch.Tensor) -> VT:
        known = self.trackers.get(id(tensor))
        if known is None or known.example is not tensor:
            unsupported(f"nonstrict_trace function {self.name} uses a tensor that none of its inputs produced")
        return known

    def _as_tracker(self, value: Any) -> VT:
        if isinstance(value, torch.Tensor):
            return self.tracker_of(value)
        return _from_pytree(self.tx, pytree.tree_map_only(torch.Tensor, self.tracker_of, value), self.name)

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) == "__get__":  # a tensor property (shape, dtype, ...)
            value = func(*args, **kwargs)
            if isinstance(value, torch.Tensor):
                unsupported(f"nonstrict_trace function {self.name} reads a tensor-valued property")
            return value
        arg_vts = [self._as_tracker(a) for a in args]
        kwarg_vts = {k: self._as_tracker(v) for k, v in kwargs.items()}
        output = self.tx.output
        method = getattr(func, "__name__", None)
        if method is not None and getattr(torch.Tensor, method, None) is func:
            vt = output.call_method(method, arg_vts, kwarg_vts)
        else:
            vt = output.call_function(func, arg_vts, kwarg_vts)
        for tracker in [vt, *getattr(vt, "items", [])]:
            if isinstance(tracker, TensorVar):
                self.trackers[id(tracker.example)] = tracker
        if isinstance(vt, TensorVar):
            return vt.example
        return pytree.tree_map_only(TensorVar, lambda t: t.example, _to_pytree(vt, self.name))
