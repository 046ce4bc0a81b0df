"""Attributes of Python functions while tracing: reads of existing functions, reads and writes of new ones.

``functools.update_wrapper``/``wraps`` copy ``__module__``, ``__name__``,
``__qualname__``, ``__doc__``, ``__annotations__`` (and ``__type_params__``)
and the ``__dict__`` of the wrapped function onto the wrapper and set
``__wrapped__``. An existing function's attributes are read through their
paths (each guarded: they are writable, which FUNCTION_MATCH does not see). A
function made while tracing keeps what is written to it in its tracker
(``FunctionState``): the special attributes apart, its ``__dict__`` as a dict
tracker sharing the recorded attributes; both are set on the function when it
is rebuilt after the graph.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.paths import Attr
from dynajit.capture._symbolic.variables.base import VT, attribute_missing, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.containers import DictVar, TupleVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["FunctionState", "read_function_attribute", "set_attributes"]

# Attributes every function has outside its __dict__ that Python lets a program read (and these, write);
# functions have __type_params__ since 3.12.
_WRITABLE = ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__") + (
    ("__type_params__",) if sys.version_info >= (3, 12) else ()
)
_READ_ONLY = ("__code__", "__defaults__", "__kwdefaults__", "__closure__", "__globals__", "__builtins__")


def read_function_attribute(tx: Tracer, fn: types.FunctionType, path: Any, name: str) -> VT:
    """``fn.name`` of an existing function: read now, guarded through ``path``."""
    if name in _WRITABLE or name == "__dict__" or name in vars(fn):
        return tx.wrap(getattr(fn, name), Attr(path, name) if path is not None else None)
    if hasattr(fn, name):
        unsupported(f"attribute {name!r} of function {fn.__qualname__}")
    attribute_missing(tx, path, name, f"'function' object has no attribute {name!r}")


class FunctionState:
    """What a function made while tracing has had written to it: special attributes and its ``__dict__``."""

    def __init__(self, prototype: types.FunctionType, annotated: bool) -> None:
        self.prototype = prototype  # the same code and globals: the defaults Python gives a new function
        self.annotated = annotated  # made with annotations, which tracing does not keep
        self.special: dict[str, VT] = {}
        self.attrs: dict[str, VT] = {}

    def children(self) -> list[VT]:
        return [*self.special.values(), *self.attrs.values()]

    def read(self, owner: VT, name: str) -> VT | None:
        """``owner.name``; None for an attribute the caller answers itself (``__code__``, ``__class__``)."""
        if name in self.special:
            return self.special[name]
        if name == "__dict__":
            return _FunctionDictVar(owner, self.attrs)
        if name == "__annotations__":
            if self.annotated:
                unsupported("the __annotations__ of a function made with annotations while tracing")
            self.special[name] = DictVar({})  # made on first read, then the same dict
            return self.special[name]
        if name in _WRITABLE:
            return ConstVar(getattr(self.prototype, name))
        if name in self.attrs:
            return self.attrs[name]
        return None

    def write(self, name: str, value: VT) -> None:
        """``fn.name = value``, checked as Python checks it."""
        if name in ("__name__", "__qualname__"):
            if not (value.is_const() and isinstance(value.const(), str)):
                raises_in_python(f"{name} must be set to a string object (TypeError)")
        elif name == "__annotations__" and not isinstance(value, DictVar):
            unsupported("setting a function's __annotations__ to other than a dict made while tracing")
        elif (
            name == "__type_params__"
            and not isinstance(value, TupleVar)
            and not (value.is_const() and isinstance(value.const(), tuple))
        ):
            raises_in_python("__type_params__ must be set to a tuple (TypeError)")
        elif name in _READ_ONLY or name in ("__dict__", "__class__"):
            unsupported(f"setting {name} of a function made while tracing")
        if name in _WRITABLE:
            self.special[name] = value
        else:
            self.attrs[name] = value

    def emit(self, cg: CodeGen) -> int:
        """Push one dict of every attribute to set on the rebuilt function (special ones first)."""
        written = {**self.special, **self.attrs}
        for name, value in written.items():
            cg.load_const(name)
            value.reconstruct(cg)
        cg.build("BUILD_MAP", len(written))
        return 1


def set_attributes(fn: types.FunctionType, attributes: dict[str, Any]) -> types.FunctionType:
    """Give a rebuilt function the attributes the trace wrote to it."""
    for name, value in attributes.items():
        setattr(fn, name, value)
    return fn


class _FunctionDictVar(DictVar):
    """``fn.__dict__`` of a function made while tracing: the same mapping as its recorded attributes."""

    def __init__(self, owner: VT, attrs: dict[str, VT]) -> None:
        super().__init__({})
        self.items = attrs  # shared on purpose: writes through the dict are the function's attributes
        self.owner = owner

    def reconstruct(self, cg: CodeGen) -> None:
        self.owner.reconstruct(cg)
        cg.load_attr("__dict__")
