"""``id(obj)`` while tracing: a constant for an object that exists before the call, guarded by identity.

The address of an object reached from the frame is read now and the entry is guarded on that same object
(``ID_MATCH``), so the constant is right for every call the entry accepts. An object made while tracing has
no address until the transformed code builds it after the graph. Its ``id()`` is a :class:`TraceId`: a
number no real object has (negative), the same for every ``id()`` of that object in the trace, so code
that only compares ids or keys a dict by them (``copy.deepcopy``'s memo) is traced exactly. TorchDynamo
answers such an ``id()`` with the address of a stand-in object; here the number may not leave the trace:
code generation refuses to load a TraceId (a graph break naming why), and anything but equality, hashing
and truth on one stops tracing there, so no value derived from an address the rebuilt object will not have
reaches Python. A tensor's ``id()`` is
a break (guarding tensor identities would recompile on every call). ``weakref.ref(obj)`` made while
tracing is a reference whose call gives ``obj``'s tracker back.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT, HeldVar, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.tensor import TensorVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["NewWeakRefVar", "TraceId", "call_id", "call_weakref", "has_trace_id", "new_container"]

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
    if obj.source is not None and real is _MISSING and _atomic_tuple(obj):
        # A tuple of the frame (its trackers do not hold the tuple itself) of immutable constants: one token per
        # path reaching it. Only an id() compared across two paths to one tuple would tell, and deepcopy (what
        # asks) returns such a tuple itself whatever its memo says.
        return _token(tx, ("path", obj.source.name()), obj)
    if obj.source is not None:
        if real is _MISSING:
            unsupported(f"id() of {obj}: the tracker does not hold the object it stands for")
        tx.output.guard("id_match", obj.source, real)
        return ConstVar(id(real))
    if isinstance(obj, ConstVar) and type(real) in _ATOMIC:
        # An immutable constant the trace holds without its origin: equal ones share a token (what CPython's
        # interning may answer too; Python leaves it open), and deepcopy's memo only compares them.
        key: Any = ("constant", type(real), real)
    elif real is not _MISSING:
        unsupported(f"id() of {obj}, an existing object not reached from the frame")
    else:
        key = id(obj)
    return _token(tx, key, obj)


def _token(tx: Tracer, key: Any, obj: VT) -> ConstVar:
    ids = _trace_ids(tx)
    if key not in ids:
        ids[key] = (obj, TraceId(-1 - len(ids)))  # the tracker is kept so its id() is not reused
    return ConstVar(ids[key][1])


def _atomic_tuple(obj: VT) -> bool:
    from dynajit.capture._symbolic.variables.containers import TupleVar

    return type(obj) is TupleVar and all(v.is_const() and type(v.const()) in _ATOMIC for v in obj.items)


_ATOMIC = (str, int, float, bool, bytes, complex, type(None))


class TraceId(int):
    """``id()`` of an object made while tracing: valid only inside the trace (see the module docstring).

    Only ``==``, ``!=``, ``hash()`` and truth are answered (what a real id answers the same way); ordering,
    arithmetic and text would depend on the address, so they raise :class:`NoAddress`, which the traced code
    cannot catch: tracing stops there and Python runs the step on the rebuilt object's real id.
    """

    def __repr__(self) -> str:  # error messages name it; it is never a number a program can read back
        return "<id() of an object made while tracing>"

    def _refuse(self, *args: Any) -> Any:
        raise NoAddress(_NO_ADDRESS)


for _name in (
    "__str__ __format__ __lt__ __le__ __gt__ __ge__ __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ "
    "__truediv__ __rtruediv__ __floordiv__ __rfloordiv__ __mod__ __rmod__ __divmod__ __rdivmod__ __pow__ "
    "__rpow__ __neg__ __pos__ __abs__ __invert__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__ __lshift__ "
    "__rlshift__ __rshift__ __rrshift__ __index__ __int__ __float__ __round__ __trunc__ __floor__ __ceil__"
).split():
    setattr(TraceId, _name, TraceId._refuse)


class NoAddress(Exception):
    """An id() of an object made while tracing was asked for more than equality."""


# A non-literal argument: the interpreter then never treats the exception as one traced code may catch.
_NO_ADDRESS = type("NoAddressReason", (), {"__str__": lambda self: "the object has no address before it is built"})()


def has_trace_id(value: Any) -> bool:
    """Whether ``value`` is (or a literal tuple/frozenset holding) a :class:`TraceId`."""
    if isinstance(value, TraceId):
        return True
    return isinstance(value, (tuple, frozenset)) and any(has_trace_id(v) for v in value)


def _trace_ids(tx: Tracer) -> dict[Any, tuple[VT, TraceId]]:
    output = tx.output
    ids = getattr(output, "trace_ids", None)
    if ids is None:
        ids = {}
        output.trace_ids = ids  # type: ignore[attr-defined]
    return ids


def _real_object(tx: Tracer, obj: VT) -> Any:
    """The Python object ``obj`` tracks, when it tracks one that exists (else ``_MISSING``)."""
    if isinstance(obj, HeldVar):
        return obj.value
    for real, tracker in tx.output.wrapped.values():  # a list or dict from the frame
        if tracker is obj:
            return real
    return _MISSING


def new_container(tx: Tracer, vt: VT) -> bool:
    """Whether ``vt`` is a list, dict or set tracker made while tracing (one tracker per such object)."""
    from dynajit.capture._symbolic.variables.containers import DictVar, ListVar, SetVar

    return isinstance(vt, (ListVar, DictVar, SetVar)) and vt.source is None and _real_object(tx, vt) is _MISSING


class NewWeakRefVar(VT):
    """``weakref.ref(obj)`` made while tracing: calling it gives ``obj``'s own tracker.

    The traced code holds ``obj`` as long as it holds the reference, so the referent is alive at every
    call; should the reference leave the trace it is made again after the graph, on the rebuilt object.
    """

    def __init__(self, referent: VT) -> None:
        self.referent = referent
        self.source = None

    def python_type(self) -> type:
        return weakref.ReferenceType

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if args or kwargs:
            raises_in_python("a weak reference is called with no arguments (TypeError)")
        return self.referent

    def reconstruct(self, cg: CodeGen) -> None:
        def emit_referent() -> int:
            self.referent.reconstruct(cg)
            return 1

        cg.call_helper(weakref.ref, emit_referent)

    def children(self) -> list[VT]:
        return [self.referent]


def call_weakref(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``weakref.ref(obj)``: a reference whose call gives ``obj`` back (a callback is not traced)."""
    if kwargs or len(args) != 1:
        unsupported("weakref.ref with a callback is not traced (the callback would run after the trace)")
    return NewWeakRefVar(args[0])
