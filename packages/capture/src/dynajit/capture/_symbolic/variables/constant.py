"""Python constants: numbers, strings, None, dtypes, devices, sizes, ranges; operations on them run at trace time."""

from __future__ import annotations

import enum
import types
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.paths import Attr
from dynajit.capture._symbolic.variables.base import VT, AttributeMissing, HeldVar, raises_in_python, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["CONSTANT_TYPES", "GUARDED_SCALARS", "ConstVar", "constant_key", "holds_symbols", "is_literal"]

# The Python scalars a ``constant_match`` guard holds by exact type and value.
GUARDED_SCALARS = (int, float, bool, str, bytes, complex, type(None))
CONSTANT_TYPES = (
    int,
    float,
    bool,
    complex,
    str,
    bytes,
    type(None),
    type(Ellipsis),
    type(NotImplemented),
    torch.dtype,
    torch.device,
    torch.Size,
    torch.layout,
    torch.memory_format,
    range,
    slice,
    tuple,
    frozenset,
)

# Values a code object may hold in co_consts (anything else is stashed as a global).
_LITERAL_TYPES = (int, float, bool, complex, str, bytes, type(None), type(Ellipsis))

# Methods of constants that are pure (no mutation, no I/O), so they can run while tracing.
_PURE_METHOD_TYPES = (int, float, bool, complex, str, bytes, tuple, frozenset, torch.Size, range)


_SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


def holds_symbols(value: Any) -> bool:
    """Whether ``value`` is a SymInt, SymFloat or SymBool, or a tuple (a ``torch.Size`` too) holding one."""
    if isinstance(value, _SYMBOLIC_TYPES):
        return True
    return isinstance(value, tuple) and any(isinstance(v, _SYMBOLIC_TYPES) for v in value)


def is_literal(value: Any) -> bool:
    """True when ``value`` can be a code constant (LOAD_CONST)."""
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset):
        return all(is_literal(v) for v in value)
    return type(value) in _LITERAL_TYPES


class ConstVar(HeldVar):
    """A Python constant known at trace time."""

    def __init__(self, value: Any, source: Any = None) -> None:
        if holds_symbols(value):
            # A SymInt held as a constant would be written into the resumed code as the symbol itself, and
            # never guarded: the caller must keep it symbolic (SymIntVar) or specialise it (int(), guarded).
            raise TypeError(f"dynajit internal error: the symbolic value {value!r} was taken for a constant")
        super().__init__(value, source)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.value)

    def unpack(self, tx: Tracer) -> list[VT]:
        if isinstance(self.value, (tuple, range, str, bytes, frozenset, set, list, dict, types.MappingProxyType)):
            return [ConstVar(v) for v in self.value]
        unsupported(f"cannot iterate over constant of type {type(self.value).__name__}")

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.functions import BuiltinVar

        try:
            attr = getattr(self.value, name)
        except AttributeError as exc:
            # A fact of the value, which is guarded itself (or computed from guarded values).
            raise AttributeMissing(f"{exc} (AttributeError)") from None
        if callable(attr):
            if not isinstance(self.value, _PURE_METHOD_TYPES):
                unsupported(f"method {name!r} of a {type(self.value).__name__} constant")
            return BuiltinVar(attr, pure=True)
        if isinstance(self.value, enum.Enum) and self.source is not None:
            # A member is guarded by identity only; its ``value`` (``_value_``) and ``name`` can be written.
            return tx.wrap(attr, Attr(self.source, name))
        return ConstVar(attr)

    def reconstruct(self, cg: CodeGen) -> None:
        if is_literal(self.value):
            cg.load_const(self.value)
        elif self.source is not None:
            self.source.emit(cg)
        else:
            cg.load_global(cg.stash(self.value))

    def __repr__(self) -> str:
        return f"ConstVar({self.value!r})"


def fold(op: Any, *values: Any) -> ConstVar:
    """Apply ``op`` to constants at trace time; an exception is left for Python to raise (a graph break)."""
    try:
        return ConstVar(op(*values))
    except Exception as exc:
        raises_in_python(f"{getattr(op, '__name__', op)} on constants raises {type(exc).__name__}: {exc}", exc)


__all__ += ["fold"]


def constant_key(key: Any) -> bool:
    """A dict key the trace may hold as a constant: a str or int, or a dtype, class or function, hashed and compared
    by identity (pytree's registry of node types, ``SUPPORTED_NODES``, holds classes and functions; a table of
    casts, ``{torch.float16: ...}[x.dtype]``, dtypes): guards look such a key up by a bound reference."""
    if isinstance(key, (str, int, torch.dtype)):
        return True
    if isinstance(key, types.FunctionType):
        return True
    meta = type(key)
    return isinstance(key, type) and meta.__eq__ is type.__eq__ and meta.__hash__ is type.__hash__
