"""``object.__reduce_ex__`` and ``object.__new__(cls)`` while tracing: what ``copy.copy``/``copy.deepcopy``
(and pickling) of a plain user object use.

For protocol 2 and above, ``object.__reduce_ex__`` of an object whose class keeps object's ``__reduce__``,
``__getstate__`` and has no ``__getnewargs(_ex)__`` nor slots answers ``(copyreg.__newobj__, (cls,), state,
None, None)`` where ``state`` is the instance ``__dict__`` itself (None when it is empty). That is built from
the object's trackers, so ``copy.deepcopy`` traces through to ``cls.__new__(cls)`` (a new object without
``__init__``) and the copied state. Anything else (a lower protocol, a class customising any of those, slots)
is a graph break naming it.
"""

from __future__ import annotations

import copyreg
import inspect
from typing import TYPE_CHECKING

from dynajit.capture._symbolic.marks import quiet_attr
from dynajit.capture._symbolic.paths import class_path
from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer
    from dynajit.capture._symbolic.variables.new_objects import NewObjectVar
    from dynajit.capture._symbolic.variables.objects import UserObjectVar

__all__ = ["ReduceExVar", "object_new"]

# What a class must leave as object's for the reduction above to be object's own.
_OBJECT_HOOKS = ("__reduce__", "__getstate__")
_ABSENT_HOOKS = ("__getnewargs_ex__", "__getnewargs__", "__slots__")


def _check_plain_reduction(cls: type, protocol: VT) -> None:
    """A break unless ``object.__reduce_ex__(protocol)`` of a ``cls`` object is the plain reduction above."""
    if not protocol.is_const() or not isinstance(protocol.const(), int):
        unsupported("object.__reduce_ex__ with other than one constant protocol")
    if protocol.const() < 2:
        unsupported(f"object.__reduce_ex__ of a {cls.__name__} object with protocol < 2 (copyreg._reduce_ex)")
    for name in _OBJECT_HOOKS:
        if inspect.getattr_static(cls, name) is not getattr(object, name, None):
            unsupported(f"object.__reduce_ex__ of a {cls.__name__} object, whose class defines {name}")
    for name in _ABSENT_HOOKS:
        if any(name in vars(base) for base in cls.__mro__):
            unsupported(f"object.__reduce_ex__ of a {cls.__name__} object, whose class defines {name}")


def _reduction(tx: Tracer, cls_vt: VT, state: VT) -> VT:
    from dynajit.capture._symbolic.variables.containers import TupleVar

    newobj = tx.wrap(getattr(copyreg, "__newobj__"), None)
    return TupleVar([newobj, TupleVar([cls_vt]), state, ConstVar(None), ConstVar(None)])


def reduce_new_object(tx: Tracer, obj: NewObjectVar, protocol: VT) -> VT:
    """``object.__reduce_ex__(protocol)`` of an object made while tracing: its recorded attributes are the state."""
    from dynajit.capture._symbolic.variables.new_objects import instance_dict_of

    if obj.items is not None:
        unsupported(f"object.__reduce_ex__ of a {obj.cls.__name__} object, a dict subclass")
    _check_plain_reduction(obj.cls, protocol)
    if obj.class_source is not None:
        for name in _ABSENT_HOOKS:
            tx.output.guard("hasattr_match", obj.class_source, name, False)
    state = instance_dict_of(obj) if obj.attrs else ConstVar(None)
    return _reduction(tx, tx.wrap(obj.cls, obj.class_source), state)


class ReduceExVar(VT):
    """``obj.__reduce_ex__`` of an object from the frame, where that is ``object.__reduce_ex__``."""

    def __init__(self, obj: UserObjectVar) -> None:
        self.obj = obj

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs or len(args) != 1:
            unsupported("object.__reduce_ex__ with other than one constant protocol")
        cls = type(self.obj.value)
        _check_plain_reduction(cls, args[0])
        cls_path = class_path(self.obj.source, self.obj.value)
        if cls_path is None or not isinstance(quiet_attr(self.obj.value, "__dict__"), dict):
            unsupported(f"object.__reduce_ex__ of a {cls.__name__} object not reached from the frame")
        for name in _ABSENT_HOOKS:
            tx.output.guard("hasattr_match", cls_path, name, False)
        state = self.obj.read_plain(tx, "__dict__") if quiet_attr(self.obj.value, "__dict__") else ConstVar(None)
        return _reduction(tx, tx.wrap(cls, cls_path), state)

    def children(self) -> list[VT]:
        return [self.obj]


def object_new(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``object.__new__(cls)``: a new object of a modelled class, without running its ``__init__``."""
    from dynajit.capture._symbolic.construct import why_not_constructible
    from dynajit.capture._symbolic.variables.new_objects import NewObjectVar, c_new_of

    if kwargs or not args or not args[0].is_const() or not isinstance(args[0].const(), type):
        unsupported("object.__new__ of other than a known class")
    cls = args[0].const()
    if c_new_of(cls) is not object.__new__:
        raises_in_python(f"object.__new__({cls.__name__}) is not safe, use {cls.__name__}.__new__() (TypeError)")
    if len(args) > 1 and cls.__new__ is not object.__new__:
        raises_in_python("object.__new__() takes exactly one argument (the type to instantiate) (TypeError)")
    if len(args) > 1 and cls.__init__ is object.__init__:
        raises_in_python(f"{cls.__name__}() takes no arguments (TypeError)")
    reason = why_not_constructible(cls)
    if reason is not None:
        unsupported(f"object.__new__({cls.__name__}) is not traced: {reason}")
    return NewObjectVar(cls, args[0].source)
