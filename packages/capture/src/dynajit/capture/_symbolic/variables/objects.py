"""Objects reached from the frame: Python modules, user-defined objects, ``super()``, exceptions, ``os.environ``
and weak references (nn.Modules are in ``modules``)."""

from __future__ import annotations

import inspect
import types
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from dynajit.capture._symbolic.cached_calls import CACHED_FUNCTION_TYPE, call_cached_function
from dynajit.capture._symbolic.marks import is_marked, quiet_attr
from dynajit.capture._symbolic.paths import Attr, Item, PlainAttr, as_class_member, class_path, reads_hooked
from dynajit.capture._symbolic.variables.base import VT, HeldVar, attribute_missing, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar, constant_key
from dynajit.capture._symbolic.variables.frame_dicts import DICT_READS, DictRead, FrameDictMethod, dict_base_method
from dynajit.capture._symbolic.variables.functions import (
    BoundMethodVar,
    call_dunder,
    class_member,
    python_dunder,
    refuse_descriptor,
)
from dynajit.capture._symbolic.variables.thread_locals import is_thread_local, read_thread_local

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "SuperVar",
    "make_super",
    "EnvironVar",
    "ExceptionVar",
    "ObjectVar",
    "PyModuleVar",
    "UserObjectVar",
    "WeakRefVar",
]


def _attr_path(vt: VT, name: str) -> Any:
    return Attr(vt.source, name) if vt.source is not None else None


def _found(value: Any, name: str) -> bool:
    """``hasattr(value, name)``, read as ``object.__getattribute__`` reads it where the class's Python
    ``__getattribute__`` would run."""
    if not reads_hooked(type(value)):
        return hasattr(value, name)
    try:
        object.__getattribute__(value, name)
    except AttributeError:
        return False
    return True


def _class_path(vt: VT) -> Any:
    return class_path(vt.source, vt.value)


def _plain_path(vt: VT, name: str) -> Any:
    """The path to what ``object.__getattribute__(obj, name)`` reads, past a Python ``__getattribute__``."""
    if vt.source is None:
        return None
    return PlainAttr(vt.source, name) if reads_hooked(type(vt.value)) else Attr(vt.source, name)


class ObjectVar(HeldVar):
    """A Python object the interpreter holds concretely (it only reads it)."""

    def truth(self, tx: Tracer) -> bool:
        cls = type(self.value)
        if hasattr(cls, "__bool__") or hasattr(cls, "__len__"):
            unsupported(f"the truth value of a {cls.__name__} object")
        return True  # an object without __bool__ or __len__ is always true

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.value).__name__})"


class PyModuleVar(ObjectVar):
    """A Python module (``torch``, ``math``, ``torch.nn.functional``, a user module)."""

    def getattr(self, tx: Tracer, name: str) -> VT:
        if not hasattr(self.value, name):
            attribute_missing(tx, self.source, name, f"module {self.value.__name__!r} has no attribute {name!r}")
        return tx.wrap(getattr(self.value, name), _attr_path(self, name))


class UserObjectVar(ObjectVar):
    """A user-defined object: attribute reads are traced, writes are recorded side effects.

    It is not a constant: operators and builtins on it may run user code (``__eq__``, ``__str__``), so
    they run in Python rather than at trace time.
    """

    def is_const(self) -> bool:
        return False

    def pending(self, tx: Tracer, name: str) -> VT | None:
        return tx.output.side_effects.pending_attr(self.value, name)

    # ----------------------------------------------------------------- protocols written in Python

    def truth(self, tx: Tracer) -> bool:
        """``bool(obj)``: the class's Python ``__bool__``, else its ``__len__``, else true."""
        cls = type(self.value)
        if python_dunder(self.value, "__bool__") is not None:
            result = call_dunder(tx, self, "__bool__", [])
            if not (result.is_const() and isinstance(result.const(), bool)):
                unsupported(f"{cls.__name__}.__bool__ returned {result}, not a bool known while tracing")
            return bool(result.const())
        if python_dunder(self.value, "__len__") is not None and not hasattr(cls, "__bool__"):
            return bool(_length_result(cls, call_dunder(tx, self, "__len__", [])))
        if not hasattr(cls, "__bool__") and dict_base_method(cls, "__len__") and self.source is not None:
            return bool(self.dict_items(tx))
        return super().truth(tx)

    def length(self, tx: Tracer) -> VT:
        """``len(obj)`` through the class's Python ``__len__``."""
        cls = type(self.value)
        if python_dunder(self.value, "__len__") is None and dict_base_method(cls, "__len__") and self.source:
            return ConstVar(len(self.dict_items(tx)))
        if python_dunder(self.value, "__len__") is None:
            if not hasattr(cls, "__len__"):
                raises_in_python(f"object of type {cls.__name__!r} has no len() (TypeError)")
            unsupported(f"len() of a {cls.__name__} object: its __len__ is implemented in C")
        return ConstVar(_length_result(cls, call_dunder(tx, self, "__len__", [])))

    def unpack(self, tx: Tracer) -> list[VT]:
        """``iter(obj)`` run to the end: the class's Python ``__iter__`` (a generator or an iterable)."""
        cls = type(self.value)
        if python_dunder(self.value, "__iter__") is None and dict_base_method(cls, "__iter__") and self.source:
            return [ConstVar(key) for key in self.dict_items(tx)]
        if python_dunder(self.value, "__iter__") is None:
            unsupported(f"cannot iterate over a {cls.__name__} object (no Python __iter__)")
        iterator = call_dunder(tx, self, "__iter__", [])
        if isinstance(iterator, UserObjectVar):
            unsupported(f"iterating over a {cls.__name__} object whose __iter__ returns an object (__next__)")
        return iterator.unpack(tx)

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        # ``obj(...)`` looks __call__ up on the class, never on the instance.
        cls = type(self.value)
        if cls is CACHED_FUNCTION_TYPE and is_marked(self.value.__wrapped__):
            # The marks of the function under the cache say how to treat its calls (``assume_constant_result``):
            # it is called as a call site of its own.
            return tx.call(self.getattr(tx, "__wrapped__"), args, kwargs)
        if cls is CACHED_FUNCTION_TYPE:
            return call_cached_function(tx, self, args, kwargs)
        method = inspect.getattr_static(cls, "__call__", None)
        if not isinstance(method, types.FunctionType):
            unsupported(
                f"calling a {cls.__name__} object ({'its __call__ is implemented in C' if method else 'not callable'})"
            )
        bound = self._class_member(tx, "__call__", method)
        assert bound is not None  # a Python function always binds
        return bound.call(tx, args, kwargs)

    def _class_member(self, tx: Tracer, name: str, static: Any) -> VT | None:
        """``static``, found on the class as ``name``, read from this object (see ``class_member``); guarded
        through the class, so a method replaced on the class recompiles."""
        class_path = _class_path(self)
        member_path = class_path and Attr(class_path, name)
        return class_member(
            tx, self, type(self.value), static, member_path, class_path=class_path, bound_path=_plain_path(self, name)
        )

    def getattr(self, tx: Tracer, name: str) -> VT:
        # A Python __getattribute__ sees written values through its own object.__getattribute__ call.
        if not isinstance(inspect.getattr_static(type(self.value), "__getattribute__"), types.FunctionType):
            found = self.pending(tx, name)
            if found is not None:
                return found
        return self._read(tx, name)

    def _read(self, tx: Tracer, name: str) -> VT:
        cls = type(self.value)
        if hasattr(cls, "__getattr__") and not issubclass(cls, torch.nn.Module):
            if python_dunder(self.value, "__getattr__") is None:
                unsupported(f"{cls.__name__} customises attribute access (__getattr__ in C)")
            # Python calls __getattr__ when the normal read raises AttributeError.
            from dynajit.capture._symbolic.variables.attribute_reads import missing_as_none

            found = missing_as_none(tx, lambda: self._read_attribute(tx, name), f"reading {cls.__name__}.{name}")
            return found if found is not None else call_dunder(tx, self, "__getattr__", [ConstVar(name)])
        return self._read_attribute(tx, name)

    def _read_attribute(self, tx: Tracer, name: str) -> VT:
        """``type(obj).__getattribute__(obj, name)``."""
        cls = type(self.value)
        getattribute = inspect.getattr_static(cls, "__getattribute__")
        is_module = issubclass(cls, torch.nn.Module)
        if cls in _IMMUTABLE_C_TYPES and self.source is not None:
            # Typing objects (``int | None``, ``list[int]``) never change: their attributes are read now, each
            # guarded through its path.
            if not hasattr(self.value, name):
                attribute_missing(tx, self.source, name, f"{cls.__name__!r} object has no attribute {name!r}")
            return tx.wrap(getattr(self.value, name), _attr_path(self, name))
        if is_thread_local(self.value):
            return read_thread_local(tx, self, self.value, name)
        if (
            "__getattribute__" in vars(cls)
            and not isinstance(getattribute, types.FunctionType)
            and not is_module
            and getattribute is not dict.__getattribute__  # the generic read, as object's
        ):
            unsupported(f"{cls.__name__} customises attribute access (__getattribute__ in C)")
        if isinstance(getattribute, types.FunctionType) and not is_module:
            class_path = _class_path(self)
            method = tx.wrap(getattribute, class_path and Attr(class_path, "__getattribute__"))
            return method.call(tx, [self, ConstVar(name)], {})
        return self.read_plain(tx, name)

    def read_plain(self, tx: Tracer, name: str) -> VT:
        """``object.__getattribute__(obj, name)``: the instance dict, then the class."""
        cls = type(self.value)
        if name == "__class__":
            return tx.wrap(cls, _class_path(self))
        instance_dict = quiet_attr(self.value, "__dict__", {})
        if name == "__dict__" and type(instance_dict) is dict and self.source is not None:
            if tx.output.side_effects.has_pending_attrs(self.value):
                unsupported(f"reading __dict__ of a {cls.__name__} object after writing its attributes")
            return tx.wrap(instance_dict, _plain_path(self, name))
        data_descriptor = _data_descriptor(cls, name)
        if data_descriptor is not None:  # a property (or other data descriptor) on the class wins over __dict__
            self.guard_not_shadowed(tx, name)  # the instance dict is not consulted: nothing to guard there
            member = self._class_member(tx, name, data_descriptor)
            if member is not None:
                return member
        dict_tracker = tx.output.wrapped.get(id(instance_dict))
        if dict_tracker is not None:  # __dict__ was read as a dict (and may have been changed through it)
            items = dict_tracker[1].items  # type: ignore[attr-defined]
            if name in items:
                return items[name]
        elif name in instance_dict:
            return tx.wrap(instance_dict[name], _plain_path(self, name))
        try:
            static = inspect.getattr_static(cls, name)
        except AttributeError:
            # (a class's Python __getattr__ answers it in _read; asking hasattr here would run it)
            if python_dunder(self.value, "__getattr__") is None and _found(self.value, name):
                unsupported(f"attribute {name!r} of a {cls.__name__} object is not found where Python reads it")
            self._missing_plain(tx, name)
        if dict_tracker is None:
            self.guard_not_shadowed(tx, name)
        member = self._class_member(tx, name, static)
        if member is not None:
            return member
        if isinstance(static, types.MemberDescriptorType):  # a slot: its value is read like an attribute
            try:
                value = (object.__getattribute__ if reads_hooked(cls) else getattr)(self.value, name)
            except AttributeError:
                attribute_missing(tx, self.source, name, f"{cls.__name__!r} object has no attribute {name!r}")
            return tx.wrap(value, _plain_path(self, name))
        if dict_base_method(cls, name) is not None and self.source is not None:
            return FrameDictMethod(self, name)
        if static is object.__reduce_ex__:
            from dynajit.capture._symbolic.variables.reduction import ReduceExVar

            return ReduceExVar(self)
        refuse_descriptor(cls, name, static)
        return tx.wrap(static, _plain_path(self, name))

    def _missing_plain(self, tx: Tracer, name: str) -> NoReturn:
        """``object.__getattribute__`` found ``name`` in neither the instance dict nor the class: guard those two,
        what it looked at, rather than ``hasattr`` of the object, which runs a class's Python ``__getattribute__``
        (a transformers config's two) again at every call, and a Python ``__getattr__`` too, where the read then
        goes on (``hasattr`` ran a hook that counted its calls once more per call). A ``__getattr__`` in C, a
        module's, or an object without a plain instance dict, keeps the ``hasattr`` guard."""
        cls = type(self.value)
        reason = f"{cls.__name__!r} object has no attribute {name!r}"
        class_path = _class_path(self)
        hook = inspect.getattr_static(cls, "__getattr__", None)
        # (a module's __getattr__ is not traced after a miss: it reads parameters, buffers and submodules, which
        # only hasattr of the module sees)
        plain = type(quiet_attr(self.value, "__dict__")) is dict and (
            hook is None or (isinstance(hook, types.FunctionType) and not issubclass(cls, torch.nn.Module))
        )
        if self.source is None or class_path is None or not plain:
            attribute_missing(tx, self.source, name, reason)
        tx.output.guard("dict_contains", _plain_path(self, "__dict__"), name, False)
        tx.output.guard("hasattr_match", class_path, name, False)
        # hasattr of the object also saw a __getattribute__ or __getattr__ the class gains or changes later: so
        # do these (the __getattr__ that answers next is traced, its own reads guarded)
        tx.output.guard("id_match", Attr(class_path, "__getattribute__"), cls.__getattribute__)
        if hook is None:
            tx.output.guard("hasattr_match", class_path, "__getattr__", False)
        else:
            tx.output.guard("id_match", Attr(class_path, "__getattr__"), hook)
        attribute_missing(tx, None, name, reason)

    def dict_items(self, tx: Tracer) -> dict[Any, VT]:
        """The items of this dict subclass object from the frame, each reached by its key; guarded by the keys."""
        assert self.source is not None and issubclass(type(self.value), dict)
        tx.output.guard("dict_keys", self.source, self.value)
        keys = list(dict.keys(self.value))
        if not all(constant_key(key) for key in keys):
            unsupported(
                f"reading a {type(self.value).__name__} object with keys other than str, int, dtypes, classes and functions"
            )
        return {key: tx.wrap(dict.__getitem__(self.value, key), Item(self.source, key)) for key in keys}

    def guard_not_shadowed(self, tx: Tracer, name: str) -> None:
        """Guard that the instance dict still lacks ``name``, which was read from the class.

        An instance attribute of that name set later would be what Python reads instead.
        """
        instance_dict = quiet_attr(self.value, "__dict__")
        if type(instance_dict) is dict and self.source is not None:
            tx.output.guard("dict_contains", _plain_path(self, "__dict__"), name, False)

    def setattr(self, tx: Tracer, name: str, value: VT) -> None:
        if self.source is None:
            unsupported("writing an attribute of an object that cannot be reached from the frame")
        cls = type(self.value)
        setter = inspect.getattr_static(cls, "__setattr__")
        if setter not in (object.__setattr__, torch.nn.Module.__setattr__) and not is_thread_local(self.value):
            if not isinstance(setter, types.FunctionType):
                unsupported(f"{cls.__name__} customises attribute writes (__setattr__ in C)")
            call_dunder(tx, self, "__setattr__", [ConstVar(name), value])
            return
        self.store(tx, name, value, plain=False)  # STORE_ATTR runs the same object/nn.Module __setattr__ again

    def store(self, tx: Tracer, name: str, value: VT, *, plain: bool = True) -> None:
        """``object.__setattr__(obj, name, value)`` (``plain``) or nn.Module's: a property's or descriptor's
        Python setter is inlined; anything else is a write recorded and replayed after the graph (a plain one
        with ``object.__setattr__``, so a class's own ``__setattr__``, already traced, does not run twice)."""
        if self.source is None:
            unsupported("writing an attribute of an object that cannot be reached from the frame")
        cls = type(self.value)
        static = inspect.getattr_static(cls, name, None)
        if isinstance(static, property) and static.fset is None:
            raises_in_python(f"property {name!r} of {cls.__name__!r} object has no setter (AttributeError)")
        if isinstance(static, property) and isinstance(static.fset, types.FunctionType):
            class_path = _class_path(self)
            fset_path = class_path and Attr(Attr(class_path, name), "fset")
            tx.wrap(static.fset, fset_path).call(tx, [self, value], {})
            return
        if python_dunder(static, "__set__") is not None:
            class_path = _class_path(self)
            member_path = as_class_member(class_path and Attr(class_path, name))  # (not through its __get__)
            call_dunder(tx, tx.wrap(static, member_path), "__set__", [self, value])
            return
        if hasattr(static, "__set__"):
            unsupported(f"{cls.__name__}.{name} is a data descriptor implemented in C: writing it runs code")
        if id(quiet_attr(self.value, "__dict__")) in tx.output.wrapped:
            unsupported(f"writing an attribute of a {cls.__name__} object after reading its __dict__")
        self.guard_not_shadowed_by_descriptor(tx, name)
        tx.output.side_effects.record_attr_write(self, name, value, plain=plain)

    def guard_not_shadowed_by_descriptor(self, tx: Tracer, name: str) -> None:
        """Guard that the class still has no data descriptor ``name`` (one added later would take the write)."""
        class_path = _class_path(self)
        if class_path is not None and not hasattr(type(self.value), name):
            tx.output.guard("hasattr_match", class_path, name, False)


# C types with their own __getattribute__ whose instances are immutable.
_IMMUTABLE_C_TYPES = (types.UnionType, types.GenericAlias)


def _length_result(cls: type, result: VT) -> int:
    """What ``len()`` makes of a ``__len__`` result: a non-negative int known while tracing."""
    if not result.is_const() or not isinstance(result.const(), int):
        unsupported(f"{cls.__name__}.__len__ returned {result}, not an int known while tracing")
    if result.const() < 0:
        raises_in_python("__len__() should return >= 0 (ValueError)")
    return int(result.const())


def _data_descriptor(cls: type, name: str) -> Any:
    """What ``cls`` defines as ``name`` when it is a data descriptor (it has ``__set__`` or ``__delete__``)."""
    static = inspect.getattr_static(cls, name, None)
    if static is None or isinstance(static, types.MemberDescriptorType):
        return None  # a slot is read by read_plain's own path
    kind = type(static)
    return static if hasattr(kind, "__set__") or hasattr(kind, "__delete__") else None


def make_super(tx: Tracer, args: list[VT]) -> SuperVar:
    """``super(cls, obj)``, or zero-argument ``super()`` from the current frame's ``__class__`` and first argument."""
    if len(args) == 2:
        return SuperVar(args[0].const(), args[1])
    if args:
        unsupported("super() with one argument")
    code = tx.code
    if "__class__" not in tx.cells or not code.co_argcount:
        raises_in_python("super(): __class__ cell not found (RuntimeError)")
    first = code.co_varnames[0]
    obj = tx.cells[first].get(tx) if first in tx.cells else tx.load_local(first) if first in tx.locals else None
    if obj is None:
        unsupported("super() before its first argument is known")
    return SuperVar(tx.cells["__class__"].get(tx).const(), obj)


class SuperVar(VT):
    """``super()`` or ``super(cls, obj)``: attribute reads resolve in ``type(obj).__mro__`` after ``cls``.

    Python methods found there are inlined bound to ``obj``; anything implemented in C (``dict.get`` of a
    dict subclass, ``object.__init__``) is a graph break naming it.
    """

    def __init__(self, cls: type, obj: VT) -> None:
        self.cls = cls
        self.obj = obj

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.classes import ClassVar
        from dynajit.capture._symbolic.variables.new_objects import MODELLED_BASES, BaseMethodVar, NewObjectVar

        instance = getattr(self.obj, "value", None)
        if isinstance(self.obj, NewObjectVar):
            obj_class, class_path = self.obj.cls, self.obj.class_source
        elif isinstance(self.obj, UserObjectVar) and instance is not None:
            obj_class, class_path = type(instance), _class_path(self.obj)
        elif isinstance(self.obj, ClassVar):
            if not issubclass(self.obj.value, self.cls) and isinstance(self.obj.value, self.cls):
                from dynajit.capture._symbolic.variables.metaclasses import metaclass_super_attribute

                return metaclass_super_attribute(tx, self.cls, self.obj, name)  # super() in a metaclass method
            return self._class_attribute(tx, name)
        else:
            unsupported(f"super() of {self.obj}")
        mro = obj_class.__mro__
        if self.cls not in mro:
            raises_in_python("super(type, obj): obj must be an instance or subtype of type (TypeError)")
        start = mro.index(self.cls) + 1
        for index in range(start, len(mro)):
            if name in vars(mro[index]):
                attr = vars(mro[index])[name]
                break
        else:
            raises_in_python(f"'super' object has no attribute {name!r} (AttributeError)")
        owner = mro[index]
        # Reached again (and guarded) as type(obj).__mro__[index].name, so replacing the base's method recompiles.
        path = Attr(Item(Attr(class_path, "__mro__"), index), name) if class_path is not None else None
        member = class_member(tx, self.obj, obj_class, attr, path)
        if member is not None:
            return member
        if isinstance(self.obj, NewObjectVar) and owner in MODELLED_BASES:
            return BaseMethodVar(self.obj, owner, name)
        if isinstance(self.obj, UserObjectVar) and owner is object and name == "__getattribute__":
            return _PlainRead(self.obj)
        if isinstance(self.obj, UserObjectVar) and owner is object and name == "__setattr__":
            return _PlainWrite(self.obj)
        if owner is dict and name in DICT_READS and self.obj.source is not None and isinstance(instance, dict):
            return DictRead(instance, self.obj, name)
        unsupported(f"super().{name} is {owner.__name__}.{name}, implemented in C: it is not traced")

    def _class_attribute(self, tx: Tracer, name: str) -> VT:
        """``super(cls, klass).name`` (``super()`` in a class method): found in ``klass.__mro__`` after ``cls``;
        a class method binds to ``klass``, a function is returned unbound, a static method is its function."""
        klass = self.obj.const()
        mro = klass.__mro__
        if self.cls not in mro:
            raises_in_python("super(type, obj): obj must be an instance or subtype of type (TypeError)")
        for index in range(mro.index(self.cls) + 1, len(mro)):
            if name in vars(mro[index]):
                attr = vars(mro[index])[name]
                break
        else:
            raises_in_python(f"'super' object has no attribute {name!r} (AttributeError)")
        source = self.obj.source
        path = Attr(Item(Attr(source, "__mro__"), index), name) if source is not None else None
        if isinstance(attr, classmethod):
            return BoundMethodVar(tx.wrap(attr.__func__, path and Attr(path, "__func__")), self.obj)
        if isinstance(attr, staticmethod):
            return tx.wrap(attr.__func__, path and Attr(path, "__func__"))
        if isinstance(attr, types.FunctionType) or not hasattr(type(attr), "__get__"):
            return tx.wrap(attr, path)
        unsupported(f"super().{name} of a class is {mro[index].__name__}.{name}, a descriptor: it is not traced")

    def __repr__(self) -> str:
        return f"SuperVar({self.cls.__name__}, {self.obj!r})"


class _PlainRead(VT):
    """``super().__getattribute__`` reaching ``object``'s: a read that skips the class's own override."""

    def __init__(self, obj: UserObjectVar) -> None:
        self.obj = obj

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs or len(args) != 1 or not args[0].is_const() or not isinstance(args[0].const(), str):
            unsupported("object.__getattribute__ with other than one constant name")
        name = args[0].const()
        return self.obj.pending(tx, name) or self.obj.read_plain(tx, name)

    def children(self) -> list[VT]:
        return [self.obj]


class _PlainWrite(VT):
    """``super().__setattr__`` reaching ``object``'s from a class's own ``__setattr__``: the plain write."""

    def __init__(self, obj: UserObjectVar) -> None:
        self.obj = obj

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs or len(args) != 2 or not args[0].is_const() or not isinstance(args[0].const(), str):
            unsupported("object.__setattr__ with other than a constant name and a value")
        self.obj.store(tx, args[0].const(), args[1])
        return ConstVar(None)

    def children(self) -> list[VT]:
        return [self.obj]


class ExceptionVar(VT):
    """An exception made from constants (``ValueError("bad")``); rebuilt in Python by calling its class again."""

    def __init__(self, cls: type[BaseException], args: list[VT]) -> None:
        self.cls = cls
        self.args = args

    def python_type(self) -> type:
        return self.cls

    def children(self) -> list[VT]:
        return list(self.args)

    def reconstruct(self, cg: CodeGen) -> None:
        def emit_args() -> int:
            for arg in self.args:
                arg.reconstruct(cg)
            return len(self.args)

        cg.call_helper(self.cls, emit_args)

    def real(self) -> BaseException:
        """The exception made again from its constant arguments."""
        return self.cls(*[a.const() for a in self.args])

    def getattr(self, tx: Tracer, name: str) -> VT:
        own_init = any(
            k.__module__ != "builtins" and ("__init__" in vars(k) or "__new__" in vars(k)) for k in self.cls.__mro__
        )
        if name == "args" and not own_init:  # a user __init__ may pass other arguments on to BaseException
            from dynajit.capture._symbolic.variables.containers import TupleVar

            return TupleVar(list(self.args))
        unsupported(f"attribute {name!r} of {self}")

    def __repr__(self) -> str:
        return f"ExceptionVar({self.cls.__name__})"


class EnvironVar(ObjectVar):
    """``os.environ``: each variable read is guarded by its value, each one found missing by its absence."""

    def read(self, tx: Tracer, key: VT) -> str | None:
        name = key.const()
        if not isinstance(name, str):
            unsupported(f"os.environ with a {type(name).__name__} key")
        if self.source is None:
            unsupported("os.environ reached other than from the frame")
        if name not in self.value:
            tx.output.guard("dict_contains", self.source, name, False)
            return None
        tx.output.guard("constant_match", Item(self.source, name), self.value[name])
        return self.value[name]

    def getitem(self, tx: Tracer, key: VT) -> VT:
        value = self.read(tx, key)
        if value is None:
            raises_in_python(f"KeyError: {key.const()!r}")
        return ConstVar(value)

    def contains(self, tx: Tracer, key: VT) -> bool:
        return self.read(tx, key) is not None

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.functions import MethodOf

        if name not in ("get", "__getitem__", "__contains__"):
            unsupported(f"os.environ.{name} is not traced")
        return MethodOf(self, name)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs or not 1 <= len(args) <= (2 if name == "get" else 1):
            raises_in_python(f"os.environ.{name} with these arguments raises TypeError")
        if name == "__contains__":
            return ConstVar(self.contains(tx, args[0]))
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        value = self.read(tx, args[0])
        if value is not None:
            return ConstVar(value)
        return args[1] if len(args) == 2 else ConstVar(None)


class WeakRefVar(ObjectVar):
    """A ``weakref.ref`` (guarded by identity): calling it gives the referent's tracker."""

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if args or kwargs:
            unsupported("calling a weak reference with arguments raises TypeError")
        referent = self.value()
        if referent is None:
            return ConstVar(None)
        if isinstance(referent, torch.Tensor):
            known = tx.output.known_tensor(referent)
            if known is None:
                unsupported("a weak reference to a tensor the traced code has not read otherwise")
            return known
        return tx.wrap(referent, None)
