"""Instances of user classes created while tracing: their attributes (and dict items) live in the tracker.

A :class:`NewObjectVar` is an object no Python code has seen yet. Its state is
recorded, not applied: attribute stores (instance attributes and slots) go into
``attrs``, item stores of a dict subclass into ``items``. Reads answer from that
state first, then from the class (methods and properties are inlined). When the
object escapes the graph (returned, stored into an existing object, live at a
graph break) the transformed code rebuilds it: ``cls.__new__(cls)``, then every
recorded attribute set with ``object.__setattr__`` and every item with the dict
base's own ``__setitem__``, so user-defined ``__setattr__``/``__setitem__`` do
not run a second time and the object ends in exactly the traced state.
"""

from __future__ import annotations

import collections
import collections.abc
import inspect
import types
from typing import TYPE_CHECKING, Any, NoReturn

from dynajit.capture._symbolic.paths import Attr
from dynajit.capture._symbolic.variables.base import VT, AttributeMissing, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.containers import DictVar, DictViewVar, ListVar, TupleVar
from dynajit.capture._symbolic.variables.functions import call_dunder, class_member, refuse_descriptor
from dynajit.capture._symbolic.variables.subclassed_builtins import (
    SEQUENCE_BASES,
    empty_sequence,
    new_tuple_instance,
    sequence_base_of,
    sequence_call,
)

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["DICT_BASES", "MODELLED_BASES", "NewObjectVar", "c_new_of", "dict_base_of", "instance_dict_of"]

# C dict types a traced class may derive from: their items are modelled in the tracker.
DICT_BASES = (collections.OrderedDict, dict)
# The C types whose methods act on a new object's modelled state (see base_call).
MODELLED_BASES = (object, *DICT_BASES, *SEQUENCE_BASES)

_MISSING = object()


def dict_base_of(cls: type) -> type | None:
    """The first modelled dict type in ``cls``'s MRO (whose ``__setitem__`` rebuilds the items), or None."""
    for base in cls.__mro__:
        if base in DICT_BASES:
            return base
    return None


def _owner_of(cls: type, name: str) -> type | None:
    for base in cls.__mro__:
        if name in vars(base):
            return base
    return None


class NewObjectVar(VT):
    """An instance of ``cls`` created by the traced code (``cls.__new__`` is object's or a dict type's)."""

    def __init__(self, cls: type, class_source: Path | None) -> None:
        self.cls = cls
        self.class_source = class_source  # how to reach cls from the frame, for guarding what is read from it
        self.attrs: dict[str, VT] = {}
        self.dict_base = dict_base_of(cls)
        self.items: dict[Any, VT] | None = {} if self.dict_base is not None else None
        self.seq_base = sequence_base_of(cls)
        self.seq = empty_sequence(self.seq_base)  # the items of a list or tuple subclass (subclassed_builtins.py)
        self.repr_running = False  # inside its recursion-guarded __repr__: a cycle back to it reads the fill value

    def python_type(self) -> type:
        return self.cls

    def children(self) -> list[VT]:
        return [*self.attrs.values(), *(self.items or {}).values(), *(self.seq.items if self.seq else ())]

    # ----------------------------------------------------------------- attributes

    def member_path(self, name: str) -> Path | None:
        """How to reach ``name`` on the class from the frame (None when the class is not reachable)."""
        return Attr(self.class_source, name) if self.class_source is not None else None

    def has_attr(self, tx: Tracer, name: str) -> bool:
        if self.python_method("__getattribute__") or self.python_method("__getattr__"):
            from dynajit.capture._symbolic.variables.attribute_reads import read_or_missing

            return read_or_missing(tx, self, name) is not None  # the class's own hooks decide
        if name in self.attrs or name == "__class__":
            return True
        if name == "__dict__":
            return _has_instance_dict(self.cls)
        static = inspect.getattr_static(self.cls, name, _MISSING)
        if static is _MISSING:
            self._guard_class_lacks(tx, name)
            return False
        if isinstance(static, types.MemberDescriptorType):
            return False  # a slot never written
        if isinstance(static, property) or _python_descriptor(static):  # Python reads it, running its code
            from dynajit.capture._symbolic.variables.attribute_reads import read_or_missing

            return read_or_missing(tx, self, name) is not None
        return True

    def getattr(self, tx: Tracer, name: str) -> VT:
        """``obj.name``: the class's Python ``__getattribute__`` when it has one, else the plain read; a
        Python ``__getattr__`` is called when that read raises AttributeError."""
        if self.python_method("__getattribute__"):
            read = lambda: self.call_python(tx, "__getattribute__", [ConstVar(name)])  # noqa: E731
        else:
            read = lambda: self.plain_getattr(tx, name)  # noqa: E731
        if not self.python_method("__getattr__"):
            return read()
        from dynajit.capture._symbolic.variables.attribute_reads import missing_as_none

        found = missing_as_none(tx, read, f"reading {self.cls.__name__}.{name}")
        return found if found is not None else self.call_python(tx, "__getattr__", [ConstVar(name)])

    def plain_getattr(self, tx: Tracer, name: str) -> VT:
        """``object.__getattribute__(obj, name)``: the instance's attributes, then the class."""
        cls = self.cls
        if name == "__class__":
            return tx.wrap(cls, self.class_source)
        if name == "__dict__":
            if not _has_instance_dict(cls) or any("__slots__" in vars(base) for base in cls.__mro__[:-1]):
                unsupported(f"the __dict__ of a {cls.__name__} object with slots")
            return _InstanceDictVar(self)
        static = inspect.getattr_static(cls, name, _MISSING)
        if isinstance(static, property):
            if not isinstance(static.fget, types.FunctionType):
                unsupported(f"property {cls.__name__}.{name} has no Python getter")
            fget_path = self.member_path(name)
            return tx.wrap(static.fget, fget_path and Attr(fget_path, "fget")).call(tx, [self], {})
        if isinstance(static, types.MemberDescriptorType) or name in self.attrs:
            if name not in self.attrs:  # a slot never written: a fact of this object, made while tracing
                _attribute_missing(cls, name)
            return self.attrs[name]
        if static is _MISSING:
            self._guard_class_lacks(tx, name)
            _attribute_missing(cls, name)
        return self._class_attr(tx, name, static)

    def _guard_class_lacks(self, tx: Tracer, name: str) -> None:
        """The class (and its bases) lack ``name``: guarded, so a class attribute added later recompiles."""
        if self.class_source is not None:
            tx.output.guard("hasattr_match", self.class_source, name, False)

    def _class_attr(self, tx: Tracer, name: str, static: Any) -> VT:
        cls = self.cls
        member = class_member(tx, self, cls, static, self.member_path(name), class_path=self.class_source)
        if member is not None:
            return member
        owner = _owner_of(cls, name)
        if owner in MODELLED_BASES and callable(static):
            return BaseMethodVar(self, owner, name)  # type: ignore[arg-type]
        refuse_descriptor(cls, name, static)
        value = getattr(cls, name)
        if self.class_source is None and _is_mutable(value):
            # Without a path to the class, a mutation of the value could not be written back after the graph.
            unsupported(f"class attribute {cls.__name__}.{name} of a class not reachable from the frame")
        return tx.wrap(value, self.member_path(name))

    def setattr(self, tx: Tracer, name: str, value: VT) -> None:
        """``obj.name = value``: through a Python ``__setattr__`` when the class defines one."""
        setter = inspect.getattr_static(self.cls, "__setattr__")
        if setter is object.__setattr__:
            self.store(tx, name, value)
            return
        if not isinstance(setter, types.FunctionType):
            unsupported(f"{self.cls.__name__}.__setattr__ is implemented in C")
        fn = tx.wrap(setter, self.member_path("__setattr__"))
        fn.call(tx, [self, ConstVar(name), value], {})

    def store(self, tx: Tracer, name: str, value: VT) -> None:
        """``object.__setattr__(obj, name, value)``: a property's setter runs, anything else is recorded."""
        cls = self.cls
        static = inspect.getattr_static(cls, name, _MISSING)
        if isinstance(static, property):
            if static.fset is None:
                raises_in_python(f"property {name!r} of {cls.__name__!r} object has no setter (AttributeError)")
            if not isinstance(static.fset, types.FunctionType):
                unsupported(f"property {cls.__name__}.{name} has no Python setter")
            fset_path = self.member_path(name)
            tx.wrap(static.fset, fset_path and Attr(fset_path, "fset")).call(tx, [self, value], {})
            return
        if _python_descriptor(static) and isinstance(
            inspect.getattr_static(type(static), "__set__", None), types.FunctionType
        ):
            descriptor = tx.wrap(static, self.member_path(name))
            call_dunder(tx, descriptor, "__set__", [self, value])
            return
        if (
            static is not _MISSING
            and hasattr(type(static), "__set__")
            and not isinstance(static, types.MemberDescriptorType)
        ):
            unsupported(f"{cls.__name__}.{name} is a data descriptor: writing it runs code")
        if not isinstance(static, types.MemberDescriptorType) and not _has_instance_dict(cls):
            raises_in_python(f"{cls.__name__!r} object has no attribute {name!r} (AttributeError)")
        self.attrs[name] = value

    def delete(self, tx: Tracer, name: str) -> None:
        """``delattr(obj, name)``: a Python ``__delattr__`` inlined, else object's (a recorded attribute removed)."""
        if self.python_method("__delattr__"):
            self.call_python(tx, "__delattr__", [ConstVar(name)])
            return
        static = inspect.getattr_static(self.cls, name, _MISSING)
        if static is not _MISSING and (hasattr(type(static), "__delete__") or hasattr(type(static), "__set__")):
            unsupported(f"deleting {self.cls.__name__}.{name}, a descriptor")
        if name not in self.attrs:
            _attribute_missing(self.cls, name)
        del self.attrs[name]

    # ----------------------------------------------------------------- protocols

    def python_method(self, name: str) -> types.FunctionType | None:
        static = inspect.getattr_static(self.cls, name, None)
        return static if isinstance(static, types.FunctionType) else None

    def call_python(self, tx: Tracer, name: str, args: list[VT]) -> VT:
        method = self.python_method(name)
        assert method is not None
        return tx.wrap(method, self.member_path(name)).call(tx, [self, *args], {})

    def getitem(self, tx: Tracer, key: VT) -> VT:
        if self.python_method("__getitem__"):
            return self.call_python(tx, "__getitem__", [key])
        return self.base_call(tx, "__getitem__", [key], {})

    def setitem(self, tx: Tracer, key: VT, value: VT) -> None:
        if self.python_method("__setitem__"):
            self.call_python(tx, "__setitem__", [key, value])
            return
        self.base_call(tx, "__setitem__", [key, value], {})

    def contains(self, tx: Tracer, key: VT) -> bool:
        if self.python_method("__contains__"):
            return self.call_python(tx, "__contains__", [key]).truth(tx)
        return self.base_call(tx, "__contains__", [key], {}).truth(tx)

    def truth(self, tx: Tracer) -> bool:
        for name in ("__bool__", "__len__"):
            if self.python_method(name):
                result = self.call_python(tx, name, [])
                return result.truth(tx) if name == "__bool__" else bool(result.const())
            if name in vars(object) or _owner_of(self.cls, name) is None:
                continue
            if self.items is not None:
                return bool(self.items)
            if self.seq is not None:
                return bool(self.seq.items)
            unsupported(f"the truth value of a {self.cls.__name__} object")
        return True

    def length(self, tx: Tracer) -> VT:
        """``len(obj)``."""
        if self.python_method("__len__"):
            return self.call_python(tx, "__len__", [])
        if self.items is not None:
            return ConstVar(len(self.items))
        if self.seq is not None:
            return ConstVar(len(self.seq.items))
        raises_in_python(f"object of type {self.cls.__name__!r} has no len() (TypeError)")

    def unpack(self, tx: Tracer) -> list[VT]:
        iterate = inspect.getattr_static(self.cls, "__iter__", None)
        if isinstance(iterate, types.FunctionType):
            iterator = self.call_python(tx, "__iter__", [])
            if isinstance(iterator, NewObjectVar):
                unsupported(f"iterating over a {self.cls.__name__} object whose __iter__ returns an object (__next__)")
            return iterator.unpack(tx)
        if self.seq is not None:
            return list(self.seq.items)
        if self.items is None:
            unsupported(f"iterating over a {self.cls.__name__} object created while tracing")
        return [ConstVar(k) for k in self.items]

    # ----------------------------------------------------------------- C methods of the base

    def base_call(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        """Call ``name`` as implemented by ``object`` or the dict base (not by any Python override)."""
        if name == "__setattr__" and len(args) == 2 and not kwargs:
            self.store(tx, _const_str(args[0], "attribute name"), args[1])
            return ConstVar(None)
        if name == "__getattribute__" and len(args) == 1 and not kwargs:
            return self.plain_getattr(tx, _const_str(args[0], "attribute name"))
        if name == "__reduce_ex__" and len(args) == 1 and not kwargs:
            from dynajit.capture._symbolic.variables.reduction import reduce_new_object

            return reduce_new_object(tx, self, args[0])
        if self.seq is not None:
            return sequence_call(tx, self.cls, self.seq, name, args, kwargs)
        if name == "__init__" and self.items is None:
            if args or kwargs:
                raises_in_python("object.__init__() takes exactly one argument (the instance to initialize)")
            return ConstVar(None)
        if self.items is None:
            unsupported(f"object.{name} of a {self.cls.__name__} object is not traced")
        return _dict_call(tx, self, self.items, name, args, kwargs)

    # ----------------------------------------------------------------- rebuilding

    def reconstruct(self, cg: CodeGen) -> None:
        def create() -> None:
            def new_args() -> int:
                cg.load_const_any(self.cls)
                if isinstance(self.seq, TupleVar):  # a tuple's items are fixed when it is made
                    self.seq.reconstruct(cg)
                    return 2
                return 1

            cg.call_helper(new_tuple_instance if isinstance(self.seq, TupleVar) else _new_instance, new_args)

        def fill(temp: str) -> None:
            def fill_args() -> int:
                cg.emit("LOAD_FAST", temp)
                for name, value in self.attrs.items():
                    cg.load_const(name)
                    value.reconstruct(cg)
                cg.build("BUILD_MAP", len(self.attrs))
                if self.items is None:
                    cg.load_const(None)
                else:
                    for key, value in self.items.items():
                        cg.load_const_any(key)
                        value.reconstruct(cg)
                    cg.build("BUILD_MAP", len(self.items))
                if isinstance(self.seq, ListVar):
                    ListVar(self.seq.items).reconstruct(cg)
                else:
                    cg.load_const(None)
                return 4

            cg.call_helper(_fill_instance, fill_args)
            cg.emit("POP_TOP")

        cg.build_object(self, create, fill)

    def __repr__(self) -> str:
        return f"NewObjectVar({self.cls.__name__})"


def _python_descriptor(static: Any) -> bool:
    """Whether ``static`` is a descriptor whose ``__get__`` is written in Python."""
    return isinstance(inspect.getattr_static(type(static), "__get__", None), types.FunctionType)


def _has_instance_dict(cls: type) -> bool:
    return cls.__dictoffset__ != 0


def _is_mutable(value: Any) -> bool:
    if isinstance(value, (list, dict, set)):
        return True
    return hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, types.FunctionType))


def _const_str(vt: VT, what: str) -> str:
    if not vt.is_const() or not isinstance(vt.const(), str):
        unsupported(f"a {what} that is not a constant string")
    return vt.const()


def _const_key(vt: VT) -> Any:
    if not vt.is_const():
        unsupported("a dict key that is not known while tracing")
    key = vt.const()
    try:
        hash(key)
    except TypeError:
        raises_in_python(f"unhashable type: {type(key).__name__!r} (TypeError)")
    return key


def _dict_call(tx: Tracer, obj: NewObjectVar, items: dict[Any, VT], name: str, args: list[VT], kwargs: dict) -> VT:
    """A dict method of the dict base, over the tracked items."""
    n = len(args)
    if name == "__setitem__" and n == 2 and not kwargs:
        items[_const_key(args[0])] = args[1]
        return ConstVar(None)
    if name in ("__getitem__", "get") and 1 <= n <= (2 if name == "get" else 1) and not kwargs:
        key = _const_key(args[0])
        if key in items:
            return items[key]
        if name == "__getitem__" and obj.python_method("__missing__"):
            return obj.call_python(tx, "__missing__", [args[0]])  # dict.__getitem__ asks a subclass's __missing__
        if name == "__getitem__":
            raises_in_python(f"KeyError: {key!r}", KeyError(key))
        return args[1] if n == 2 else ConstVar(None)
    if name == "__contains__" and n == 1 and not kwargs:
        return ConstVar(_const_key(args[0]) in items)
    if name == "__delitem__" and n == 1 and not kwargs:
        key = _const_key(args[0])
        if key not in items:
            raises_in_python(f"KeyError: {key!r}", KeyError(key))
        del items[key]
        return ConstVar(None)
    if name == "__len__" and not n and not kwargs:
        return ConstVar(len(items))
    if name in DictViewVar.KINDS and not n and not kwargs:
        return DictViewVar(obj, items, name, obj.dict_base or dict)
    if name in ("__init__", "update") and n <= 1:
        if n and not isinstance(args[0], DictVar):
            unsupported(f"{obj.cls.__name__}.{name} with a {args[0]} argument")
        for key, value in [*(args[0].items.items() if n else ()), *kwargs.items()]:  # type: ignore[attr-defined]
            items[key] = value
        return ConstVar(None)
    unsupported(f"dict.{name} of a {obj.cls.__name__} object is not traced")


class BaseMethodVar(VT):
    """``obj.name`` (or ``super().name``) resolving to a method of ``object`` or of the dict base."""

    def __init__(self, obj: NewObjectVar, owner: type, name: str) -> None:
        self.obj = obj
        self.owner = owner
        self.name = name

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return self.obj.base_call(tx, self.name, args, kwargs)

    def children(self) -> list[VT]:
        return [self.obj]

    def __repr__(self) -> str:
        return f"BaseMethodVar({self.owner.__name__}.{self.name} of {self.obj!r})"


class _InstanceDictVar(DictVar):
    """``obj.__dict__`` of a new object: the same mapping as its recorded attributes, so writes go to both."""

    def __init__(self, obj: NewObjectVar) -> None:
        super().__init__({})
        self.items = obj.attrs  # shared on purpose: the object's attributes are this dict
        self.owner = obj

    def reconstruct(self, cg: CodeGen) -> None:
        self.owner.reconstruct(cg)
        cg.load_attr("__dict__")


def instance_dict_of(obj: NewObjectVar) -> DictVar:
    """``obj.__dict__`` of a new object: the same mapping as its recorded attributes."""
    return _InstanceDictVar(obj)


def _new_instance(cls: type) -> Any:
    # The C __new__ the object was made by: a Python __new__ of the class already ran while tracing.
    return c_new_of(cls)(cls)


def c_new_of(cls: type) -> Any:
    """The ``__new__`` implemented in C that ``cls``'s instances are made by (``object.__new__``, ``dict``'s)."""
    for base in cls.__mro__:
        new = vars(base).get("__new__")
        if new is not None and not isinstance(new, staticmethod):
            return new
    return object.__new__


def _fill_instance(obj: Any, attrs: dict[str, Any], items: dict[Any, Any] | None, sequence: list | None) -> None:
    # object.__setattr__ sets slots and plain attributes alike and skips the class's own __setattr__,
    # which already ran while tracing.
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    if items is not None:
        base = dict_base_of(type(obj))
        assert base is not None, "items are recorded only for dict subclasses"
        setitem = getattr(base, "__setitem__")  # mypy reads base.__setitem__ as an assignment target
        for key, value in items.items():
            setitem(obj, key, value)
    if sequence is not None:
        list.extend(obj, sequence)  # the list base's own extend: a Python override already ran while tracing


def _attribute_missing(cls: type, name: str) -> NoReturn:
    """Raise the guarded absence of ``name`` on a new object, with Python's own AttributeError (catchable)."""
    error = AttributeMissing(f"{cls.__name__!r} object has no attribute {name!r} (AttributeError)")
    error.exception = AttributeError(f"{cls.__name__!r} object has no attribute {name!r}")
    raise error
