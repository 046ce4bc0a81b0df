"""Metaclasses while tracing: a Python ``__call__`` on the metaclass, and ``type.__call__`` it delegates to.

Calling a class runs ``type(cls).__call__(cls, ...)``. When a metaclass
defines ``__call__`` in Python it is inlined with the class as its first
argument (guarded through ``cls.__class__.__call__``, so a metaclass method
swapped later recompiles; a Python metaclass without one is guarded to still
have ``type``'s). ``super().__call__(*args)`` inside it (super of the
metaclass, bound to the class) is ``type.__call__``: the construction of
``construct.py`` (``__new__``, then ``__init__`` when the result is an
instance). Other metaclass methods found by ``super()`` are inlined when they
are Python functions.
"""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING

from dynajit.capture._symbolic.paths import Attr, Item
from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.functions import BoundMethodVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["TypeCallVar", "metaclass_super_attribute", "python_metaclass_call"]


def _class_path(cls_vt: VT) -> Attr | None:
    return Attr(cls_vt.source, "__class__") if cls_vt.source is not None else None


def python_metaclass_call(tx: Tracer, cls_vt: VT) -> VT | None:
    """``type(cls).__call__`` when the metaclass defines it in Python (None: ``type``'s own runs)."""
    meta = type(cls_vt.const())
    call = inspect.getattr_static(meta, "__call__")
    meta_path = _class_path(cls_vt)
    path = Attr(meta_path, "__call__") if meta_path is not None else None
    if isinstance(call, types.FunctionType):
        return tx.wrap(call, path)
    if call is not vars(type)["__call__"]:
        unsupported(f"the metaclass {meta.__qualname__} of {cls_vt.const().__qualname__} has a __call__ in C")
    if meta is not type:
        tx.output.guard("id_match", path, call)  # a __call__ added to the metaclass later would run instead
    return None


class TypeCallVar(VT):
    """``type.__call__`` bound to a class (``super().__call__`` in a metaclass): construct an instance."""

    def __init__(self, cls_vt: VT) -> None:
        self.cls_vt = cls_vt

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.construct import construct_instance, constructs_instances

        cls = self.cls_vt.const()
        if not constructs_instances(cls):
            unsupported(f"type.__call__ of {cls.__qualname__}, a class not written in Python")
        return construct_instance(tx, cls, self.cls_vt.source, args, kwargs)

    def children(self) -> list[VT]:
        return [self.cls_vt]

    def __repr__(self) -> str:
        return f"TypeCallVar({self.cls_vt.const().__qualname__})"


def metaclass_super_attribute(tx: Tracer, start: type, cls_vt: VT, name: str) -> VT:
    """``super(start, cls).name`` where ``cls`` is an instance of the metaclass ``start`` (not a subclass):
    found in ``type(cls).__mro__`` after ``start`` and bound to ``cls``."""
    mro = type(cls_vt.const()).__mro__
    for index in range(mro.index(start) + 1, len(mro)):
        if name in vars(mro[index]):
            attr = vars(mro[index])[name]
            break
    else:
        raises_in_python(f"'super' object has no attribute {name!r} (AttributeError)")
    if attr is vars(type)["__call__"]:
        return TypeCallVar(cls_vt)
    if isinstance(attr, types.FunctionType):
        meta_path = _class_path(cls_vt)
        path = Attr(Item(Attr(meta_path, "__mro__"), index), name) if meta_path is not None else None
        return BoundMethodVar(tx.wrap(attr, path), cls_vt)
    unsupported(f"super().{name} of a metaclass is {mro[index].__name__}.{name}, implemented in C: it is not traced")
