"""Calling a user class while tracing: a new tracked object, with its ``__init__`` inlined.

Only classes whose instances the interpreter can model are constructed here: a
metaclass of ``type`` (or ``abc.ABCMeta``), ``__new__`` inherited from
``object`` or a modelled dict type, no ``__getattr__``/``__getattribute__``, and
no C base other than ``object``, ``dict``, ``OrderedDict`` and ``typing.Generic``.
Anything else is a graph break whose reason names what is not modelled. Nothing
is applied to real objects while ``__init__`` runs, so a construction that cannot
be traced leaves every user object as it was: the call then runs in Python.
"""

from __future__ import annotations

import abc
import inspect
import types
import typing
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.paths import Attr
from dynajit.capture._symbolic.variables import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.containers import TupleVar, is_named_tuple_class
from dynajit.capture._symbolic.variables.enums import is_enum_class
from dynajit.capture._symbolic.variables.iterators import iterator_of
from dynajit.capture._symbolic.variables.new_objects import DICT_BASES, NewObjectVar, c_new_of
from dynajit.capture._symbolic.variables.subclassed_builtins import SEQUENCE_BASES

if TYPE_CHECKING:
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "constructs_instances",
    "construct_instance",
    "construct_torch_module",
    "is_plain_module_subclass",
    "is_stateless_torch_module_class",
    "python_new",
    "why_not_constructible",
]

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or a C heap type)
_C_MEMBERS = (types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType)
_METACLASSES = (type, abc.ABCMeta)
_C_BASES = (object, *DICT_BASES, *SEQUENCE_BASES, typing.Generic)
_NEW_FUNCTIONS = (object.__new__, dict.__new__, list.__new__, tuple.__new__)
_NOT_CONSTRUCTED = (torch.nn.Module, torch.Tensor, BaseException)


def _written_in_python(cls: type) -> bool:
    # Since 3.12 many C types are heap types too; their own dict holds their C methods and slot wrappers,
    # which a class statement never puts there.
    if not cls.__flags__ & _HEAPTYPE:
        return False
    if isinstance(vars(cls).get("__new__"), types.BuiltinFunctionType):
        return False
    return not any(isinstance(value, _C_MEMBERS) for value in vars(cls).values())


def constructs_instances(cls: type) -> bool:
    """Whether calling ``cls`` is traced as a construction (a class written in Python outside torch).

    Exceptions are not: the builtins table makes them (rebuilt by calling their class), so ``raise`` works.
    """
    inside_torch = cls.__module__ == "torch" or cls.__module__.startswith("torch.")  # (not torchvision's)
    return _written_in_python(cls) and not inside_torch and not issubclass(cls, BaseException)


def _python_metaclass(meta: type) -> bool:
    """A metaclass written in Python over ``type`` (its ``__call__`` is handled by the caller, metaclasses.py)."""
    return all(base in (type, object) or _written_in_python(base) for base in meta.__mro__)


def python_new(cls: type) -> types.FunctionType | None:
    """``cls.__new__`` when a class written in Python defines it (a static method), else None."""
    new = inspect.getattr_static(cls, "__new__")
    return new.__func__ if isinstance(new, staticmethod) and isinstance(new.__func__, types.FunctionType) else None


def why_not_constructible(cls: type) -> str | None:
    """Why an instance of ``cls`` cannot be modelled while tracing (None when it can)."""
    if is_enum_class(cls):
        return "an enum's members are looked up, not made"
    if type(cls) not in _METACLASSES and not _python_metaclass(type(cls)):
        return f"its metaclass {type(cls).__qualname__} is not modelled"
    if getattr(cls, "__abstractmethods__", None):
        return "it is abstract"
    for kind in _NOT_CONSTRUCTED:
        if issubclass(cls, kind):
            return f"constructing a {kind.__qualname__} subclass is not traced"
    for base in cls.__mro__:
        if not _written_in_python(base) and base not in _C_BASES:
            return f"it derives from {base.__qualname__}, implemented in C and not modelled"
    if cls.__new__ not in _NEW_FUNCTIONS and python_new(cls) is None:
        return "its __new__ is implemented in C"
    if hasattr(cls, "__del__"):
        # An object the graph never hands to Python would never be finalized: eager code would see the difference.
        return "it defines __del__"
    for name in ("__getattribute__", "__getattr__"):
        static = inspect.getattr_static(cls, name, None)
        if static is None or static is getattr(object, name, None) or static in _dict_slots(name):
            continue
        if not isinstance(static, types.FunctionType):  # a Python one is traced (see NewObjectVar.getattr)
            return f"it customises attribute reads ({name} in C)"
    setter = inspect.getattr_static(cls, "__setattr__")
    if setter is not object.__setattr__ and not isinstance(setter, types.FunctionType):
        return "its __setattr__ is implemented in C"
    return None


def _dict_slots(name: str) -> tuple[Any, ...]:
    return tuple(vars(base)[name] for base in (*DICT_BASES, *SEQUENCE_BASES) if name in vars(base))


def construct_instance(tx: Tracer, cls: type, class_source: Path | None, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``cls(*args, **kwargs)``: a :class:`NewObjectVar` after its ``__init__`` was inlined."""
    if is_named_tuple_class(cls):
        return _construct_named_tuple(tx, cls, class_source, args, kwargs)
    reason = why_not_constructible(cls)
    if reason is not None:
        unsupported(f"constructing {cls.__qualname__} is not traced: {reason}")
    new = python_new(cls)
    if new is None:
        made = NewObjectVar(cls, class_source)
        if isinstance(made.seq, TupleVar):  # tuple.__new__(cls, iterable=()) fixes the items
            if kwargs or len(args) > 1:
                raises_in_python(f"{cls.__qualname__}() takes at most one positional argument (TypeError)")
            made.seq.items = iterator_of(tx, args[0]).unpack(tx) if args else []
        obj: VT = made
    else:
        # type.__call__: cls.__new__(cls, *args, **kwargs), then __init__ only when that made an instance of cls.
        new_path = Attr(class_source, "__new__") if class_source is not None else None
        obj = tx.wrap(new, new_path).call(tx, [tx.wrap(cls, class_source), *args], kwargs)
        kind = obj.cls if isinstance(obj, NewObjectVar) else obj.python_type()
        if not issubclass(kind, cls):
            return obj
    init = inspect.getattr_static(cls, "__init__")
    if isinstance(init, types.FunctionType):
        path = Attr(class_source, "__init__") if class_source is not None else None
        result = tx.wrap(init, path).call(tx, [obj, *args], kwargs)
        if not (result.is_const() and result.const() is None):
            raises_in_python("__init__() should return None (TypeError)")
    elif init is object.__init__:
        if (args or kwargs) and new is None and c_new_of(cls) is object.__new__:
            # (object.__init__ accepts the arguments a Python __new__, or tuple.__new__, took)
            raises_in_python(f"{cls.__qualname__}() takes no arguments (TypeError)")
    elif any(init is vars(base).get("__init__") for base in (*DICT_BASES, list)) and isinstance(obj, NewObjectVar):
        obj.base_call(tx, "__init__", args, kwargs)
    else:
        unsupported(f"constructing {cls.__qualname__} is not traced: its __init__ is not a Python function")
    return obj


def _construct_named_tuple(
    tx: Tracer, cls: type, class_source: Path | None, args: list[VT], kwargs: dict[str, VT]
) -> VT:
    """A named tuple: its generated ``__new__`` is inlined, and ends in ``tuple.__new__(cls, items)``."""
    new = cls.__new__
    if not isinstance(new, types.FunctionType) or inspect.getattr_static(cls, "__init__") is not object.__init__:
        unsupported(f"constructing {cls.__qualname__} is not traced: it overrides the named tuple's __new__/__init__")
    path = Attr(class_source, "__new__") if class_source is not None else None
    return tx.wrap(new, path).call(tx, [tx.wrap(cls, class_source), *args], kwargs)


def is_stateless_torch_module_class(cls: Any) -> bool:
    """A module class of ``torch.nn`` itself (``nn.ReLU``, ``nn.CrossEntropyLoss``, ...), not a user subclass."""
    return (
        isinstance(cls, type)
        and issubclass(cls, torch.nn.Module)
        and cls.__module__.startswith("torch.nn.modules.")
        and getattr(torch.nn, cls.__name__, None) is cls
    )


# What a class may define that nn.Module's own construction would run (or that changes what it makes).
_CONSTRUCTION_HOOKS = ("__init__", "__new__", "__setattr__", "__getattr__", "__getattribute__", "__del__")


def is_plain_module_subclass(cls: Any) -> bool:
    """A Module subclass whose construction runs only ``nn.Module.__init__`` (transformers' ``SiLUActivation``,
    made by ``ACT2FN["silu"]`` inside forward): no class before ``nn.Module`` in its MRO defines a construction
    hook or a data descriptor (``nn.Module.__init__`` sets attributes through them), and its metaclass is type."""
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)) or type(cls) is not type:
        return False
    for base in cls.__mro__:
        if base is torch.nn.Module:
            return True
        if any(name in vars(base) for name in _CONSTRUCTION_HOOKS):
            return False
        if any(hasattr(type(value), "__set__") or hasattr(type(value), "__delete__") for value in vars(base).values()):
            return False
    return False


def construct_torch_module(tx: Tracer, cls: type, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``nn.ReLU()`` / ``nn.CrossEntropyLoss(reduction="sum")`` made inside traced code, from constants.

    The module is made for real while tracing (its constructor only stores its settings) and must hold no
    parameters or buffers (making those would draw random numbers or hold tensors the graph cannot
    know); calling it inlines its forward. When it escapes it is made again by the same call.
    """
    from dynajit.capture._symbolic.variables.modules import NNModuleVar

    if not all(a.is_const() for a in [*args, *kwargs.values()]):
        unsupported(f"constructing {cls.__name__} from other than constants")
    const_args = [a.const() for a in args]
    const_kwargs = {k: v.const() for k, v in kwargs.items()}
    try:
        # On the meta device, with the random state restored: a constructor that makes parameters must not
        # draw random numbers (or allocate) here, since the call then runs again in Python.
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            module = cls(*const_args, **const_kwargs)
    except Exception as exc:
        raises_in_python(f"{cls.__name__}(...) raises {type(exc).__name__}: {exc}")
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        unsupported(f"constructing {cls.__name__} inside the traced code makes parameters or buffers")
    if any(isinstance(value, torch.Tensor) for value in vars(module).values()):
        unsupported(f"constructing {cls.__name__} inside the traced code stores a tensor")
    return NNModuleVar(module, None, rebuild=(cls, const_args, const_kwargs))
