"""``==``/``!=``, ``hash()``, ``repr()``/``str()``/``format()`` of objects made while tracing.

Python looks these up on the class. A method written in Python (a user's ``__eq__`` or ``__repr__``, the
ones ``dataclasses`` generates) is inlined like any other method; ``object``'s own are modelled where the
answer is known while tracing: equality falls back to identity, and ``str()``/``format()`` go through
``repr()``. What ``object`` answers from the object's address (its ``__hash__`` and ``__repr__``) exists
only once the object is built after the graph, so those stay graph breaks.
"""

from __future__ import annotations

import dataclasses
import inspect
import operator
import reprlib
import sys
import types
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.new_objects import NewObjectVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["equality", "format_object", "hash_object", "object_identity_equality", "text_of_object"]

# Constants whose own __eq__/__ne__ answer NotImplemented for an object of another class.
_FOREIGN_TO_EQUALITY = (int, float, complex, bool, str, bytes, tuple, type(None))


# The wrappers reprlib.recursive_repr (and dataclasses before 3.12) put around a __repr__.
_RECURSION_GUARD_CODES = frozenset(
    maker(lambda self: "").__code__
    for maker in (reprlib.recursive_repr(), getattr(dataclasses, "_recursive_repr", None))
    if maker is not None
)


def _class_function(obj: NewObjectVar, name: str) -> Any:
    """What ``type(obj)`` defines as ``name`` (None when nothing does)."""
    return inspect.getattr_static(obj.cls, name, None)


def _call(tx: Tracer, obj: NewObjectVar, function: types.FunctionType, path: Path | None, args: list[VT]) -> VT:
    return tx.wrap(function, path).call(tx, [obj, *args], {})


# ----------------------------------------------------------------- == and !=


def equality(tx: Tracer, op: Any, left: VT, right: VT) -> VT:
    """``left == right`` or ``left != right`` (``op``) where one side is an object made while tracing."""
    from dynajit.capture._symbolic.opcodes_ops import identical

    name = "__eq__" if op is operator.eq else "__ne__"
    left_type, right_type = _type_for_equality(left), _type_for_equality(right)
    reflected_first = left_type is not right_type and issubclass(right_type, left_type)
    order = [(right, left), (left, right)] if reflected_first else [(left, right), (right, left)]
    for obj, other in order:
        result = _compare_slot(tx, name, obj, other)
        if not (result.is_const() and result.const() is NotImplemented):
            return result
    same = identical(left, right, tx)
    return ConstVar(same if op is operator.eq else not same)


def object_identity_equality(tx: Tracer, op: Any, left: VT, right: VT) -> VT | None:
    """``obj == constant`` (or ``!=``, either order) for an object of the frame whose class and the constant's
    both keep ``object``'s ``__eq__`` and ``__ne__`` (a value pattern, ``case Color.RED``, against another
    object): Python falls back to identity. The object's class keeping them is guarded; None otherwise."""
    from dynajit.capture._symbolic.opcodes_ops import identical
    from dynajit.capture._symbolic.paths import Attr, class_path
    from dynajit.capture._symbolic.variables.objects import UserObjectVar

    obj, constant = (left, right) if isinstance(left, UserObjectVar) else (right, left)
    if not isinstance(obj, UserObjectVar) or obj.source is None or not constant.is_const():
        return None
    kinds = (type(obj.value), type(constant.const()))
    if not all(kind.__eq__ is object.__eq__ and kind.__ne__ is object.__ne__ for kind in kinds):
        return None
    cls_path = class_path(obj.source, obj.value)
    for name, slot in (("__eq__", object.__eq__), ("__ne__", object.__ne__)):
        tx.output.guard("id_match", Attr(cls_path, name), slot)
    same = identical(left, right, tx)
    return ConstVar(same if op is operator.eq else not same)


def _type_for_equality(vt: VT) -> type:
    if isinstance(vt, NewObjectVar):
        return vt.cls
    if vt.is_const() and type(vt.const()) in _FOREIGN_TO_EQUALITY:
        return type(vt.const())
    unsupported(f"comparing an object made while tracing with {vt} (==, !=)")


def _compare_slot(tx: Tracer, name: str, obj: VT, other: VT) -> VT:
    """``type(obj).<name>(obj, other)``, which may answer NotImplemented."""
    if not isinstance(obj, NewObjectVar):
        return ConstVar(NotImplemented)  # a constant's own comparison knows no user classes
    method = _class_function(obj, name)
    if isinstance(method, types.FunctionType):
        return _call(tx, obj, method, obj.member_path(name), [other])
    if method is object.__eq__:
        return ConstVar(True if obj is other else NotImplemented)
    if method is object.__ne__:
        # object.__ne__ inverts what the class's __eq__ answers.
        equal = _compare_slot(tx, "__eq__", obj, other)
        if equal.is_const() and equal.const() is NotImplemented:
            return equal
        return ConstVar(not equal.truth(tx))
    unsupported(f"{obj.cls.__name__}.{name} is implemented in C ({getattr(method, '__qualname__', method)})")


# ----------------------------------------------------------------- hash()


def hash_object(tx: Tracer, obj: NewObjectVar) -> VT:
    """``hash(obj)``: a Python ``__hash__`` inlined; ``object``'s, from the object's address, is a break."""
    method = _class_function(obj, "__hash__")
    name = obj.cls.__name__
    if method is None:
        raises_in_python(f"unhashable type: {name!r} (TypeError)")
    if method is object.__hash__:
        unsupported(
            f"hash() of a {name} object made while tracing is object.__hash__, taken from the address "
            "the object has only once it is built after the graph"
        )
    if not isinstance(method, types.FunctionType):
        unsupported(f"{name}.__hash__ is implemented in C")
    result = _call(tx, obj, method, obj.member_path("__hash__"), [])
    if not result.is_const():
        unsupported(f"{name}.__hash__ returned {result}, not a number known while tracing")
    value = result.const()
    if not isinstance(value, int):
        raises_in_python("__hash__ method should return an integer (TypeError)")
    return ConstVar(_hash_of_hash_result(value))


def _hash_of_hash_result(value: int) -> int:
    """What hash() makes of the int a ``__hash__`` returned: kept when it fits a C ssize_t (-1 is the error
    value, so -2), else hashed as an int."""
    if -sys.maxsize - 1 <= value <= sys.maxsize:
        return -2 if value == -1 else int(value)
    return hash(value)


# ----------------------------------------------------------------- repr(), str(), ascii(), format()


def text_of_object(tx: Tracer, obj: NewObjectVar, convert: Any) -> VT:
    """``repr(obj)``, ``str(obj)`` or ``ascii(obj)`` (``convert``), as a constant string."""
    if convert is str:
        method = _class_function(obj, "__str__")
        if isinstance(method, types.FunctionType):
            return _text_result(tx, _call(tx, obj, method, obj.member_path("__str__"), []), "__str__")
        if method is not object.__str__:
            unsupported(f"{obj.cls.__name__}.__str__ is implemented in C")
        # object.__str__ is repr()
    text = _repr(tx, obj)
    if convert is ascii:
        return ConstVar(_ascii_text(text.const()))
    return text


def _ascii_text(text: str) -> str:
    """What ascii() makes of an object whose repr() is ``text``: non-ASCII characters escaped."""
    return text.encode("ascii", "backslashreplace").decode("ascii")


def _repr(tx: Tracer, obj: NewObjectVar) -> VT:
    name = obj.cls.__name__
    method = _class_function(obj, "__repr__")
    path = obj.member_path("__repr__")
    if isinstance(method, types.FunctionType) and method.__code__ in _RECURSION_GUARD_CODES:
        # The guard keys on id(self), which a traced object does not have: the same check is made on its tracker.
        tx.wrap(method, path)  # guards the class's __repr__; the function it wraps is in the wrapper's closure
        closure = method.__closure__ or ()
        captured = {name: cell.cell_contents for name, cell in zip(method.__code__.co_freevars, closure)}
        if obj.repr_running:
            return ConstVar(captured.get("fillvalue", "..."))
        obj.repr_running = True
        try:
            result = _call(tx, obj, captured["user_function"], None, [])
        finally:
            obj.repr_running = False
        return _text_result(tx, result, "__repr__")
    if isinstance(method, types.FunctionType):
        return _text_result(tx, _call(tx, obj, method, path, []), "__repr__")
    if method is object.__repr__:
        unsupported(
            f"repr() of a {name} object made while tracing is object.__repr__, which shows the address "
            "the object has only once it is built after the graph"
        )
    unsupported(f"{name}.__repr__ is implemented in C")


def _text_result(tx: Tracer, result: VT, method: str) -> VT:
    if not result.is_const():
        unsupported(f"{method} returned {result}, not a string known while tracing")
    if not isinstance(result.const(), str):
        raises_in_python(f"{method} returned non-string (type {type(result.const()).__name__}) (TypeError)")
    return ConstVar(result.const())


def format_object(tx: Tracer, obj: NewObjectVar, spec: VT | None) -> VT:
    """``format(obj, spec)`` (an f-string's ``{obj:spec}``) as a constant string."""
    if spec is not None and not (spec.is_const() and isinstance(spec.const(), str)):
        unsupported("a format spec that is not a constant string")
    spec_text = spec.const() if spec is not None else ""
    method = _class_function(obj, "__format__")
    if isinstance(method, types.FunctionType):
        result = _call(tx, obj, method, obj.member_path("__format__"), [ConstVar(spec_text)])
        return _text_result(tx, result, "__format__")
    if method is not object.__format__:
        unsupported(f"{obj.cls.__name__}.__format__ is implemented in C")
    if spec_text:
        raises_in_python(f"unsupported format string passed to {obj.cls.__name__}.__format__ (TypeError)")
    return text_of_object(tx, obj, str)
