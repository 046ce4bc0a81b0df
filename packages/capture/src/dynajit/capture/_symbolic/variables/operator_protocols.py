"""Operators on user objects, as Python dispatches them to the classes' Python special methods.

``a + b`` tries ``type(a).__add__(a, b)``, then ``type(b).__radd__(b, a)``
when that answers NotImplemented (the reflected method first when ``b``'s
class is a proper subclass of ``a``'s overriding it); ``a += b`` tries
``__iadd__`` first. Rich comparisons reflect ``<`` to ``>`` and ``<=`` to
``>=``. This applies when one operand is an object made while tracing or
reached from the frame and a method found is written in Python (each is read
through the class, guarded); a builtin number, string or None on the other
side answers NotImplemented for a user class, as in Python. Anything else is
left to the other operator rules. A unary operator (``-a``, ``+a``, ``~a``) calls the class's ``__neg__``,
``__pos__`` or ``__invert__``; a class without it raises TypeError.
"""

from __future__ import annotations

import inspect
import operator
import types
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT, raises_in_python
from dynajit.capture._symbolic.variables.new_objects import NewObjectVar
from dynajit.capture._symbolic.variables.objects import UserObjectVar
from dynajit.capture._symbolic.variables.subclassed_builtins import SEQUENCE_OPERATORS, items_of, sequence_operator

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["object_operator", "object_unary_operator"]

_SYMBOLS = {
    operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/", operator.floordiv: "//",
    operator.mod: "%", operator.pow: "** or pow()", operator.matmul: "@", operator.lshift: "<<",
    operator.rshift: ">>", operator.and_: "&", operator.or_: "|", operator.xor: "^",
    operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
}  # fmt: skip
_IN_PLACE = {
    operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
    operator.itruediv: operator.truediv, operator.ifloordiv: operator.floordiv, operator.imod: operator.mod,
    operator.ipow: operator.pow, operator.imatmul: operator.matmul, operator.ilshift: operator.lshift,
    operator.irshift: operator.rshift, operator.iand: operator.and_, operator.ior: operator.or_,
    operator.ixor: operator.xor,
}  # fmt: skip
_REFLECTED_COMPARISON = {operator.lt: "__gt__", operator.le: "__ge__", operator.gt: "__lt__", operator.ge: "__le__"}
# Builtin values whose operators answer NotImplemented for an instance of a user class.
_FOREIGN = (int, float, complex, bool, str, bytes, type(None))


def _names(op: Any) -> tuple[str, str]:
    name = op.__name__.strip("_")  # "and_" -> "and"
    if op in _REFLECTED_COMPARISON:
        return f"__{name}__", _REFLECTED_COMPARISON[op]
    return f"__{name}__", f"__r{name}__"


def _dunder(op: Any, reflected: bool = False) -> str:
    """The special method ``op`` calls first (``__iadd__`` for ``+=``), or its reflected form."""
    if op in _IN_PLACE:
        return _names(_IN_PLACE[op])[1] if reflected else "__i" + _names(_IN_PLACE[op])[0][2:]
    return _names(op)[1 if reflected else 0]


def _class_of(vt: VT) -> type | None:
    if isinstance(vt, NewObjectVar):
        return vt.cls
    if isinstance(vt, UserObjectVar):
        return type(vt.value)
    return None


_NO_METHOD = object()


def _slot(vt: VT, name: str) -> Any:
    """The class's ``name`` when written in Python; None when the class lacks it; _NO_METHOD when it is in C."""
    cls = _class_of(vt)
    if cls is None:
        return None if vt.is_const() and type(vt.const()) in _FOREIGN else _NO_METHOD
    found = inspect.getattr_static(cls, name, None)
    if found is vars(object).get(name):
        return None  # object's comparisons answer NotImplemented
    if found is None or isinstance(found, types.FunctionType):
        return found
    return _NO_METHOD


def _call(tx: Tracer, obj: VT, name: str, *other: VT) -> VT:
    if isinstance(obj, NewObjectVar):
        method = tx.wrap(_slot(obj, name), obj.member_path(name))
        return method.call(tx, [obj, *other], {})
    from dynajit.capture._symbolic.variables.functions import call_dunder

    return call_dunder(tx, obj, name, list(other))


_UNARY = {operator.neg: ("__neg__", "-"), operator.pos: ("__pos__", "+"), operator.invert: ("__invert__", "~")}


def object_unary_operator(tx: Tracer, op: Any, a: VT) -> VT | None:
    """``op(a)`` through the class's Python special method; None when this protocol does not decide it."""
    if _class_of(a) is None or op not in _UNARY:
        return None
    name, symbol = _UNARY[op]
    slot = _slot(a, name)
    if slot is _NO_METHOD:
        return None
    if slot is None:
        message = f"bad operand type for unary {symbol}: {_class_of(a).__name__!r}"  # type: ignore[union-attr]
        raises_in_python(f"TypeError: {message}", TypeError(message))
    return _call(tx, a, name)


def object_operator(tx: Tracer, op: Any, a: VT, b: VT) -> VT | None:
    """``op(a, b)`` through the operands' Python special methods; None when this protocol does not decide it."""
    if _class_of(a) is None and _class_of(b) is None:
        return None
    if op in SEQUENCE_OPERATORS and (items_of(a) is not a or items_of(b) is not b):
        if not any(isinstance(_slot(v, n), types.FunctionType) for v, n in ((a, _dunder(op)), (b, _dunder(op, True)))):
            return sequence_operator(tx, op, a, b)  # the list or tuple base's own operator
    if op in _IN_PLACE:
        in_place_name = _dunder(op)
        in_place = _slot(a, in_place_name)
        if in_place is _NO_METHOD:
            return None
        if in_place is not None:
            result = _call(tx, a, in_place_name, b)
            if not (result.is_const() and result.const() is NotImplemented):
                return result
        op = _IN_PLACE[op]
    if op not in _SYMBOLS:
        return None
    name, reflected = _names(op)
    attempts = [(a, name, b), (b, reflected, a)]
    type_a, type_b = _class_of(a), _class_of(b)
    if type_a is not None and type_a is type_b:
        attempts = attempts[:1]  # the same class: the reflected method is not tried
    elif type_a is not None and type_b is not None and issubclass(type_b, type_a):
        if _slot(b, reflected) is not _slot(a, reflected):
            attempts.reverse()  # a subclass overriding the reflected method goes first
    slots = [_slot(obj, method) for obj, method, _ in attempts]
    if any(slot is _NO_METHOD for slot in slots) and not any(isinstance(s, types.FunctionType) for s in slots):
        return None  # no Python method decides it
    for (obj, method, other), slot in zip(attempts, slots):
        if slot is None:
            continue
        if slot is _NO_METHOD:
            return None  # a method in C would answer next: left to the other rules
        result = _call(tx, obj, method, other)
        if not (result.is_const() and result.const() is NotImplemented):
            return result
    kinds = [type_a or type(a.const()), type_b or type(b.const())]
    message = f"unsupported operand type(s) for {_SYMBOLS[op]}: {kinds[0].__name__!r} and {kinds[1].__name__!r}"
    if op in _REFLECTED_COMPARISON:
        message = f"{_SYMBOLS[op]!r} not supported between instances of {kinds[0].__name__!r} and {kinds[1].__name__!r}"
    raises_in_python(f"TypeError: {message}", TypeError(message))
