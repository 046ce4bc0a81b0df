"""User subclasses of ``list`` and ``tuple`` made while tracing: their items live in the object's tracker.

A :class:`~dynajit.capture._symbolic.variables.new_objects.NewObjectVar` of
such a class keeps its items in ``seq`` (a list or tuple tracker) next to its
attributes. The base's C methods (``list.append``, ``__getitem__``, ``len``,
iteration, ``+``) act on those items, reached unoverridden or through
``super()``; the class's Python methods are inlined as for any new object. A
tuple subclass gets its items from ``tuple.__new__(cls, iterable)`` (directly
or from a Python ``__new__``), a list subclass from ``list.__init__``. When
the object escapes it is rebuilt as ``tuple.__new__(cls, items)`` or
``list.__new__(cls)`` extended with its items, then its attributes are set.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.containers import ListVar, TupleVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "SEQUENCE_BASES",
    "SEQUENCE_OPERATORS",
    "empty_sequence",
    "items_of",
    "new_tuple_instance",
    "sequence_base_of",
    "sequence_call",
    "sequence_operator",
]

# C sequence types a traced class may derive from: their items are modelled in the tracker.
SEQUENCE_BASES = (list, tuple)

_COMPARISONS = {
    "__lt__": operator.lt, "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge,
    "__eq__": operator.eq, "__ne__": operator.ne,
}  # fmt: skip
# Operators of the base that make a plain list or tuple (or extend the list in place).
SEQUENCE_OPERATORS = (operator.add, operator.mul, operator.iadd, operator.imul)


def sequence_base_of(cls: type) -> type | None:
    """``list`` or ``tuple`` when ``cls`` derives from it, else None."""
    for base in cls.__mro__:
        if base in SEQUENCE_BASES:
            return base
    return None


def empty_sequence(base: type | None) -> ListVar | TupleVar | None:
    """The items tracker a new object of a class over ``base`` starts with."""
    if base is list:
        return ListVar([])
    return TupleVar([]) if base is tuple else None


def sequence_call(tx: Tracer, cls: type, seq: ListVar | TupleVar, name: str, args: list[VT], kwargs: dict) -> VT:
    """``base.name(obj, *args)`` for the list or tuple base of a ``cls`` object whose items are ``seq``."""
    from dynajit.capture._symbolic.opcodes_ops import apply_operator, identical
    from dynajit.capture._symbolic.variables.iterators import iterator_of

    n = len(args)
    if kwargs and name not in ("sort",):
        raises_in_python(f"{type(seq.items).__name__}.{name}() takes no keyword arguments (TypeError)")
    if name == "__init__":
        if isinstance(seq, ListVar):
            if n > 1:
                raises_in_python(f"list expected at most 1 argument, got {n} (TypeError)")
            seq.items[:] = iterator_of(tx, args[0]).unpack(tx) if args else []
        return ConstVar(None)  # a tuple's items came from tuple.__new__; object.__init__ takes the arguments
    if name == "__len__" and not n:
        return ConstVar(len(seq.items))
    if name == "__getitem__" and n == 1:
        return seq.getitem(tx, args[0])
    if name in ("__setitem__", "__delitem__") and isinstance(seq, ListVar):
        if name == "__setitem__" and n == 2:
            seq.setitem(tx, args[0], args[1])
            return ConstVar(None)
        if name == "__delitem__" and n == 1:
            seq.delitem(tx, args[0])
            return ConstVar(None)
    if name == "__contains__" and n == 1:
        return ConstVar(any(identical(args[0], item, tx) or _equal(tx, args[0], item) for item in seq.items))
    if name == "__iter__" and not n:
        return iterator_of(tx, TupleVar(seq.items))
    if name in _COMPARISONS and n == 1:
        return apply_operator(tx, _COMPARISONS[name], [seq, items_of(args[0])])
    if name.startswith("__") and name not in ("__reversed__",):
        unsupported(f"{cls.__name__}: {type(seq.items).__name__}.{name} of its base is not traced")
    return seq.method(tx, name, args, kwargs)


def items_of(vt: VT) -> VT:
    """The items tracker of a list or tuple subclass object made while tracing, else ``vt`` itself."""
    seq = getattr(vt, "seq", None)
    return seq if isinstance(seq, (ListVar, TupleVar)) else vt


def sequence_operator(tx: Tracer, op: Any, a: VT, b: VT) -> VT:
    """``a <op> b`` by the list or tuple base of either operand: a plain list or tuple, or ``a`` extended."""
    from dynajit.capture._symbolic.opcodes_ops import apply_operator

    left, right = items_of(a), items_of(b)
    result = apply_operator(tx, op, [left, right])
    return a if result is left and left is not a else result  # list.__iadd__ returns the object itself


def _equal(tx: Tracer, a: VT, b: VT) -> bool:
    from dynajit.capture._symbolic.opcodes_ops import apply_operator

    if a.is_const() and b.is_const():
        return bool(a.const() == b.const())
    return apply_operator(tx, operator.eq, [a, b]).truth(tx)


def new_tuple_instance(cls: type, items: Any) -> Any:
    """Rebuild a tuple subclass object: its items are fixed when it is made."""
    return tuple.__new__(cls, items)  # type: ignore[type-var]
