"""``id(obj)`` while tracing: a constant for an object that exists before the call, guarded by identity.

The address of an object reached from the frame is read now and the entry is guarded on that same object
(``ID_MATCH``), so the constant is right for every call the entry accepts. An object made while tracing has
no address until the transformed code builds it after the graph, so its ``id()`` (like its
``object.__hash__`` and ``object.__repr__``) is a graph break naming why. TorchDynamo answers it with the
address of a placeholder object that the rebuilt one never has; that would be silently wrong once the number
is kept or compared with the real object's, so it is not done here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT, HeldVar, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.tensor import TensorVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["call_id"]

_MISSING = object()


def call_id(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``id(obj)``: the address of an object from the frame as a constant, guarded by identity."""
    if kwargs or len(args) != 1:
        raises_in_python("id() takes exactly one argument (TypeError)")
    (obj,) = args
    if isinstance(obj, TensorVar):
        # Guarding a tensor's identity would recompile for every new input tensor.
        unsupported("id() of a tensor is not traced (its identity changes with every call)")
    real = _real_object(tx, obj)
    if real is _MISSING or obj.source is None:
        unsupported(
            f"id() of {obj}, which is not reached from the frame (an object made while tracing has its address "
            "only once it is built after the graph)"
        )
    tx.output.guard("id_match", obj.source, real)
    return ConstVar(id(real))


def _real_object(tx: Tracer, obj: VT) -> Any:
    """The Python object ``obj`` tracks, when it tracks one that exists (else ``_MISSING``)."""
    if isinstance(obj, HeldVar):
        return obj.value
    for real, tracker in tx.output.wrapped.values():  # a list or dict from the frame
        if tracker is obj:
            return real
    return _MISSING
