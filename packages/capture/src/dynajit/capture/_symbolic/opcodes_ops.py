"""Opcode handlers: binary and unary operators, comparisons, subscripts, containment and f-strings."""

from __future__ import annotations

import inspect
import operator
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.data_dependent import DataScalarVar
from dynajit.capture._symbolic.registry import handler
from dynajit.capture._symbolic.variables import (
    VT,
    ConstVar,
    DictVar,
    DictViewVar,
    ListVar,
    ModuleSliceVar,
    NNModuleVar,
    ObjectVar,
    SetVar,
    SizeVar,
    SliceVar,
    TensorVar,
    TupleVar,
    UserObjectVar,
    unsupported,
)
from dynajit.capture._symbolic.variables.classes import ClassVar
from dynajit.capture._symbolic.variables.constant import fold
from dynajit.capture._symbolic.variables.enums import enum_getitem, is_enum_class
from dynajit.capture._symbolic.variables.iterators import iterator_of
from dynajit.capture._symbolic.variables.ndarrays import NdarrayVar, ndarray_getitem, ndarray_operator, ndarray_setitem
from dynajit.capture._symbolic.variables.new_objects import NewObjectVar
from dynajit.capture._symbolic.variables.object_protocols import (
    equality,
    format_object,
    object_identity_equality,
    text_of_object,
)
from dynajit.capture._symbolic.variables.objects import EnvironVar
from dynajit.capture._symbolic.variables.operator_protocols import object_operator, object_unary_operator
from dynajit.capture._symbolic.variables.symbolic import SymIntVar
from dynajit.capture._symbolic.variables.typing_folds import is_typing_object, subscript_typing_object

if TYPE_CHECKING:
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer

BINARY_OPS: dict[str, Any] = {
    "ADD": operator.add,
    "AND": operator.and_,
    "FLOOR_DIVIDE": operator.floordiv,
    "LSHIFT": operator.lshift,
    "MATRIX_MULTIPLY": operator.matmul,
    "MULTIPLY": operator.mul,
    "REMAINDER": operator.mod,
    "OR": operator.or_,
    "POWER": operator.pow,
    "RSHIFT": operator.rshift,
    "SUBTRACT": operator.sub,
    "TRUE_DIVIDE": operator.truediv,
    "XOR": operator.xor,
    "INPLACE_ADD": operator.iadd,
    "INPLACE_AND": operator.iand,
    "INPLACE_FLOOR_DIVIDE": operator.ifloordiv,
    "INPLACE_LSHIFT": operator.ilshift,
    "INPLACE_MATRIX_MULTIPLY": operator.imatmul,
    "INPLACE_MULTIPLY": operator.imul,
    "INPLACE_REMAINDER": operator.imod,
    "INPLACE_OR": operator.ior,
    "INPLACE_POWER": operator.ipow,
    "INPLACE_RSHIFT": operator.irshift,
    "INPLACE_SUBTRACT": operator.isub,
    "INPLACE_TRUE_DIVIDE": operator.itruediv,
    "INPLACE_XOR": operator.ixor,
    "SUBSCR": operator.getitem,
}

COMPARE_OPS: dict[str, Any] = {
    "<": operator.lt,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
}

UNARY_OPS: dict[str, Any] = {
    "UNARY_NEGATIVE": operator.neg,
    "UNARY_INVERT": operator.invert,
    "UNARY_POSITIVE": operator.pos,
}


def apply_operator(tx: Tracer, op: Any, args: list[VT]) -> VT:
    """``op(*args)`` on trackers: a graph node for tensors, folded for constants, traced for containers."""
    if op in (operator.eq, operator.ne) and any(isinstance(a, NewObjectVar) for a in args):
        return equality(tx, op, *args)
    if op in (operator.eq, operator.ne) and (by_identity := object_identity_equality(tx, op, *args)) is not None:
        return by_identity
    if len(args) == 2 and op not in (operator.eq, operator.ne):
        through_methods = object_operator(tx, op, args[0], args[1])  # the classes' Python __add__, __radd__, ...
        if through_methods is not None:
            return through_methods
    if len(args) == 1 and (through_method := object_unary_operator(tx, op, args[0])) is not None:
        return through_method
    if len(args) == 2 and isinstance(args[0], DictViewVar):
        return args[0].operator(tx, op, args[1], reflected=False)
    if len(args) == 2 and isinstance(args[1], DictViewVar):
        return args[1].operator(tx, op, args[0], reflected=True)
    if any(isinstance(a, NdarrayVar) for a in args):
        return ndarray_operator(tx, op, args)
    if any(isinstance(a, TensorVar) for a in args):
        if op in (operator.eq, operator.ne) and _foreign_to_tensor_equality(args):
            # Tensor.__eq__ answers NotImplemented for what is not a number (None, a str, an enum member, a tuple),
            # and the other side's object.__eq__ too: Python compares identities, which differ.
            return ConstVar(op is operator.ne)
        return tx.output.call_function(op, args, {})
    if any(isinstance(a, SymIntVar) for a in args) and all(isinstance(a, SymIntVar) or _number(a) for a in args):
        return symbolic_operator(tx, op, args)
    if op in _SET_IN_PLACE and isinstance(args[0], SetVar) and args[1].is_const():
        return args[0].operate_in_place(op, args[1])  # (folded, it changed a copy: aliases kept the old set)
    if all(a.is_const() for a in args) and not any(isinstance(a, (ListVar, DictVar)) for a in args):
        return tx.wrap_const(fold(op, *[a.const() for a in args]).value)
    if op is operator.getitem:
        return getitem(tx, args[0], args[1])
    return _sequence_operator(tx, op, args)


_SET_IN_PLACE = (operator.ior, operator.iand, operator.isub, operator.ixor)


def _foreign_to_tensor_equality(args: list[VT]) -> bool:
    tensor, other = args if isinstance(args[0], TensorVar) else args[::-1]
    if not isinstance(tensor, TensorVar) or tensor.python_type().__eq__ is not torch.Tensor.__eq__:
        return False
    if isinstance(other, TensorVar) or not other.is_const():
        return False
    kind = type(other.const())
    return kind in (str, bytes, tuple, list, dict, type(None)) or (
        kind.__eq__ is object.__eq__ and not issubclass(kind, (int, float, complex))
    )


def _number(vt: VT) -> bool:
    return vt.is_const() and type(vt.const()) in (int, float, bool)


def symbolic_operator(tx: Tracer, op: Any, args: list[VT]) -> VT:
    """An operator on symbolic ints: a graph node for arithmetic, a guarded Python bool for a comparison."""
    if op in COMPARE_OPS.values() and not any(isinstance(a, DataScalarVar) for a in args):
        values = [a.example if isinstance(a, SymIntVar) else a.const() for a in args]
        return ConstVar(bool(op(*values)))
    if op in _RAISES_WHEN:
        _raise_where_python_raises(op, args)
    return tx.output.call_function(op, args, {})  # an in-place operator is recorded out of place there


# Where Python raises for an int operator, by its right operand: the graph's node would not (its symbolic
# expression gives a number, ``1 << -2`` reads as ``2 ** -2``), or would raise when the graph runs, outside any
# ``try`` of the traced code (and a C++ kernel's integer division by zero kills the process).
_RAISES_WHEN: dict[Any, tuple[str, Callable[[Any], Any], int]] = {
    **dict.fromkeys((operator.floordiv, operator.mod, operator.ifloordiv, operator.imod), ("0", lambda v: v == 0, 0)),
    **dict.fromkeys(
        (operator.lshift, operator.rshift, operator.ilshift, operator.irshift), ("negative", lambda v: v < 0, -1)
    ),
}


def _raise_where_python_raises(op: Any, args: list[VT]) -> None:
    """Raise as Python does when the right operand makes ``op`` raise on this call; otherwise guard that it does
    not (a size symbol ``s - 3`` is 0 only for ``s == 3``, which the entry must then not accept)."""
    left, right = args
    what, raises, example = _RAISES_WHEN[op]
    if isinstance(right, DataScalarVar):
        unsupported(f"operator {op.__name__} on a number read from tensor data: it may be {what}, where Python raises")
    if bool(raises(right.example if isinstance(right, SymIntVar) else right.const())):  # a guard on a symbol
        fold(op, left.const() if left.is_const() else 1, right.const() if right.is_const() else example)


def _sequence_operator(tx: Tracer, op: Any, args: list[VT]) -> VT:
    a, b = (_as_sequence(tx, v) for v in args)
    if op in (operator.add, operator.iadd) and any(isinstance(v, SizeVar) for v in (a, b)):
        if not all(type(v) in (SizeVar, TupleVar) for v in (a, b)):
            unsupported(f"operator {op.__name__} on {a} and {b}")
        return SizeVar([*a.items, *b.items])  # type: ignore[attr-defined]  # a Size on either side gives a Size
    if op in (operator.add, operator.iadd) and isinstance(a, (ListVar, TupleVar)) and type(a) is type(b):
        if op is operator.iadd and isinstance(a, ListVar):
            a.items.extend(b.items)  # type: ignore[attr-defined]
            a.mutated(tx)
            return a
        return type(a)([*a.items, *b.items])  # type: ignore[attr-defined]
    if op is operator.iadd and isinstance(a, ListVar):
        a.items.extend(b.unpack(tx))
        a.mutated(tx)
        return a
    if op in (operator.mul, operator.imul) and isinstance(a, (ListVar, TupleVar)) and b.is_const():
        if op is operator.imul and isinstance(a, ListVar):  # the list itself repeated, as list.__imul__
            a.items[:] = a.items * b.const()  # type: ignore[attr-defined]
            a.mutated(tx)
            return a
        return type(a)(a.items * b.const())
    if op in (operator.or_, operator.ior) and isinstance(a, DictVar):
        return a.method(tx, "__ior__" if op is operator.ior else "__or__", [b], {})
    if (
        op in (operator.eq, operator.ne)
        and isinstance(a, (ListVar, TupleVar))
        and not any(isinstance(v, TensorVar) for v in [*a.items, *getattr(b, "items", ())])
    ):
        return _sequence_equality(tx, op, a, b)
    if op in (operator.eq, operator.ne) and isinstance(a, (ListVar, TupleVar, DictVar)):
        unsupported("comparing containers of tensors")
    unsupported(f"operator {op.__name__} on {a} and {b}")


def _as_sequence(tx: Tracer, vt: VT) -> VT:
    """A constant tuple, list or torch.Size as a tracker of its items (to meet a sequence holding symbols).

    A container already tracked is itself: a list is one object, which ``+=`` extends in place (a copy of a list
    of constants left the caller's list and its aliases as they were)."""
    if isinstance(vt, (ListVar, TupleVar)) or not vt.is_const() or type(vt.const()) not in (tuple, list, torch.Size):
        return vt
    if type(vt.const()) is torch.Size:
        return SizeVar([ConstVar(n) for n in vt.const()])
    return tx.wrap_const(vt.const())


def _sequence_equality(tx: Tracer, op: Any, a: ListVar | TupleVar, b: VT) -> VT:
    """``a == b`` / ``a != b`` of a list or tuple holding symbolic sizes (``x.shape == (2, 3)``), item by item."""
    if not isinstance(b, (ListVar, TupleVar)):
        unsupported(f"operator {op.__name__} on {a} and {b}")
    # A list never equals a tuple; a torch.Size is a tuple.
    equal = isinstance(a, ListVar) == isinstance(b, ListVar) and len(a.items) == len(b.items)
    for x, y in zip(a.items, b.items) if equal else ():
        same = apply_operator(tx, operator.eq, [x, y])
        if not same.is_const():
            unsupported(f"comparing {x} and {y} inside sequences")
        if not same.const():
            equal = False
            break
    return ConstVar(equal if op is operator.eq else not equal)


def getitem(tx: Tracer, obj: VT, key: VT) -> VT:
    if isinstance(obj, NdarrayVar):
        return ndarray_getitem(tx, obj, key)
    if isinstance(obj, TensorVar):
        return tx.output.call_function(operator.getitem, [obj, key], {})
    if isinstance(obj, (TupleVar, ListVar, DictVar, NNModuleVar, ModuleSliceVar, EnvironVar)):
        return obj.getitem(tx, key)
    if isinstance(obj, ClassVar) and is_enum_class(obj.value):
        return enum_getitem(tx, obj, key)
    if obj.is_const() and key.is_const():
        return tx.wrap_const(fold(operator.getitem, obj.const(), key.const()).value)
    if is_typing_object(getattr(obj, "value", None)):
        typed = subscript_typing_object(tx, obj, key)
        if typed is not None:
            return typed
    if isinstance(obj, UserObjectVar) and (_python_method(obj, "__getitem__") or isinstance(obj.value, dict)):
        # a user-defined __getitem__ is inlined; a dict subclass's own one reads the real dict
        return obj.getattr(tx, "__getitem__").call(tx, [key], {})
    if isinstance(obj, NewObjectVar):
        return obj.getitem(tx, key)
    unsupported(f"subscripting {obj}")


def _python_method(obj: UserObjectVar, name: str) -> bool:
    return isinstance(inspect.getattr_static(type(obj.value), name, None), types.FunctionType)


@handler("BINARY_OP")
def _binary_op(tx: Tracer, inst: Inst) -> None:
    b = tx.pop()
    a = tx.pop()
    tx.push(apply_operator(tx, BINARY_OPS[inst.arg], [a, b]))


@handler("BINARY_SUBSCR")
def _binary_subscr(tx: Tracer, inst: Inst) -> None:
    key = tx.pop()
    obj = tx.pop()
    tx.push(getitem(tx, obj, key))


@handler("BINARY_SLICE", since=(3, 12))
def _binary_slice(tx: Tracer, inst: Inst) -> None:
    stop = tx.pop()
    start = tx.pop()
    obj = tx.pop()
    tx.push(getitem(tx, obj, SliceVar([start, stop])))


@handler("STORE_SUBSCR")
def _store_subscr(tx: Tracer, inst: Inst) -> None:
    key = tx.pop()
    obj = tx.pop()
    value = tx.pop()
    _setitem(tx, obj, key, value)


@handler("STORE_SLICE", since=(3, 12))
def _store_slice(tx: Tracer, inst: Inst) -> None:
    stop = tx.pop()
    start = tx.pop()
    obj = tx.pop()
    value = tx.pop()
    _setitem(tx, obj, SliceVar([start, stop]), value)


def _setitem(tx: Tracer, obj: VT, key: VT, value: VT) -> None:
    if isinstance(obj, NdarrayVar):
        ndarray_setitem(tx, obj, key, value)
        return
    if isinstance(obj, TensorVar):
        tx.output.call_function(operator.setitem, [obj, key, value], {})
        return
    if isinstance(obj, (ListVar, DictVar, NewObjectVar)):
        obj.setitem(tx, key, value)
        return
    unsupported(f"item assignment on {obj}")


@handler("DELETE_SUBSCR")
def _delete_subscr(tx: Tracer, inst: Inst) -> None:
    key = tx.pop()
    obj = tx.pop()
    if not isinstance(obj, (ListVar, DictVar)):
        unsupported(f"item deletion on {obj}")
    obj.delitem(tx, key)


@handler("COMPARE_OP")
def _compare_op(tx: Tracer, inst: Inst) -> None:
    b = tx.pop()
    a = tx.pop()
    result = apply_operator(tx, COMPARE_OPS[inst.arg], [a, b])
    if inst.extra.get("cast") and not isinstance(result, TensorVar):
        result = ConstVar(result.truth(tx))
    tx.push(result)


@handler("IS_OP")
def _is_op(tx: Tracer, inst: Inst) -> None:
    b = tx.pop()
    a = tx.pop()
    tx.push(ConstVar(identical(a, b, tx) != bool(inst.arg)))


def identical(a: VT, b: VT, tx: Tracer | None = None) -> bool:
    """``a is b``. With ``tx``, an identity that only a type guard stood for is guarded by identity."""
    from dynajit.capture._symbolic.variables.identity import new_container

    if a is b:
        return True
    if isinstance(a, NewObjectVar) or isinstance(b, NewObjectVar):
        return False  # one tracker per object made while tracing, and it is no object that existed before
    if tx is not None and (new_container(tx, a) or new_container(tx, b)):
        return False  # likewise for a list, dict or set made while tracing
    if tx is not None and _tracked_apart(tx, a, b):
        return False
    if isinstance(a, ObjectVar) and isinstance(b, ObjectVar):
        if tx is not None:
            for side in (a, b):
                # A user object is guarded by its type only: which object it is becomes a fact here.
                if isinstance(side, UserObjectVar):
                    if side.source is None:
                        unsupported(f"identity of {side}, which cannot be reached from the frame to guard it")
                    tx.output.guard("id_match", side.source, side.value)
        return a.value is b.value
    const_a = a.const() if a.is_const() else _NOT_CONST
    const_b = b.const() if b.is_const() else _NOT_CONST
    if const_a is not _NOT_CONST and const_b is not _NOT_CONST:
        return const_a is const_b
    if isinstance(a, TensorVar) and isinstance(b, TensorVar):
        # An in-place op (``y = x.add_(1)``) or an ``out=`` call returns the very tensor it wrote: its fake is
        # that tensor's fake, while its node is a new one.
        return a.node is b.node or a._example is b._example
    if const_a is None or const_b is None or type(a) is not type(b):
        # A tensor, container or function is never None, nor an object of another kind.
        return False
    unsupported(f"identity of {a} and {b}")


_NOT_CONST = object()


def _tracked_apart(tx: Tracer, a: VT, b: VT) -> bool:
    """Whether ``a`` and ``b`` track two different objects read from the frame (one tracker per mutable object):
    then they are different objects, which a guard keeps true."""
    first, second = getattr(a, "source", None), getattr(b, "source", None)
    if first is None or second is None:
        return False
    trackers = {id(tracker) for _, tracker in tx.output.wrapped.values()}
    if id(a) not in trackers or id(b) not in trackers:
        return False
    tx.output.apart[(first, second)] = None
    return True


@handler("CONTAINS_OP")
def _contains_op(tx: Tracer, inst: Inst) -> None:
    container = tx.pop()
    item = tx.pop()
    if isinstance(container, DictVar):
        found = item.const() in container.items
    elif isinstance(container, (DictViewVar, EnvironVar)):
        found = container.contains(tx, item)
    elif isinstance(container, TensorVar) or isinstance(item, TensorVar):
        unsupported("`in` on tensors depends on their data")
    elif container.is_const() and item.is_const():
        found = fold(operator.contains, container.const(), item.const()).value
    elif isinstance(container, UserObjectVar) and _python_method(container, "__contains__"):
        found = container.getattr(tx, "__contains__").call(tx, [item], {}).truth(tx)
    elif isinstance(container, NewObjectVar):
        found = container.contains(tx, item)
    else:
        # Python takes the items one by one and stops at the first equal one: a generator is left after it.
        iterator = iterator_of(tx, container)
        found = False
        while not found and (other := iterator.next()) is not None:
            found = identical(item, other, tx) or _member_equal(tx, item, other)
    tx.push(ConstVar(bool(found) != bool(inst.arg)))


def _member_equal(tx: Tracer, item: VT, other: VT) -> bool:
    """``item == other`` as ``in`` asks it: constants folded, symbolic sizes compared (and guarded)."""
    if other.is_const() and item.is_const():
        return bool(other.const() == item.const())
    if isinstance(item, SymIntVar) or isinstance(other, SymIntVar):
        return apply_operator(tx, operator.eq, [other, item]).truth(tx)
    return False


@handler("UNARY_POSITIVE", until=(3, 12))
def _unary_positive(tx: Tracer, inst: Inst) -> None:
    tx.push(apply_operator(tx, operator.pos, [tx.pop()]))


@handler("LIST_TO_TUPLE", until=(3, 12))
def _list_to_tuple(tx: Tracer, inst: Inst) -> None:
    tx.push(TupleVar(tx.pop().unpack(tx)))


@handler("UNARY_NEGATIVE", "UNARY_INVERT")
def _unary(tx: Tracer, inst: Inst) -> None:
    tx.push(apply_operator(tx, UNARY_OPS[inst.opname], [tx.pop()]))


@handler("UNARY_NOT")
def _unary_not(tx: Tracer, inst: Inst) -> None:
    tx.push(ConstVar(not tx.pop().truth(tx)))


@handler("CALL_INTRINSIC_1", since=(3, 12))
def _call_intrinsic_1(tx: Tracer, inst: Inst) -> None:
    name = getattr(inst.arg, "name", str(inst.arg))
    if name == "INTRINSIC_LIST_TO_TUPLE":
        tx.push(TupleVar(tx.pop().unpack(tx)))
    elif name == "INTRINSIC_UNARY_POSITIVE":
        tx.push(apply_operator(tx, operator.pos, [tx.pop()]))
    else:
        unsupported(f"CALL_INTRINSIC_1 {name} is not traced")


_CONVERSIONS: dict[int, Any] = {0: None, 1: str, 2: repr, 3: ascii}


def _format(tx: Tracer, value: VT, conversion: int, spec: VT | None) -> VT:
    if isinstance(value, NewObjectVar):
        if not conversion:
            return format_object(tx, value, spec)
        value, conversion = text_of_object(tx, value, _CONVERSIONS[conversion]), 0
    if not value.is_const() or (spec is not None and not spec.is_const()):
        unsupported(f"formatting {value} in an f-string")
    raw = value.const()
    convert = _CONVERSIONS[conversion]
    if convert is not None:
        raw = convert(raw)
    return fold(format, raw, spec.const() if spec is not None else "")


@handler("FORMAT_VALUE", until=(3, 13))
def _format_value(tx: Tracer, inst: Inst) -> None:
    spec = tx.pop() if inst.arg & 4 else None
    tx.push(_format(tx, tx.pop(), inst.arg & 3, spec))


@handler("CONVERT_VALUE", since=(3, 13))
def _convert_value(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    if isinstance(value, NewObjectVar):
        tx.push(text_of_object(tx, value, _CONVERSIONS[int(inst.arg)]))
        return
    if not value.is_const():
        unsupported(f"converting {value} in an f-string")
    tx.push(ConstVar(_CONVERSIONS[int(inst.arg)](value.const())))


@handler("FORMAT_SIMPLE", since=(3, 13))
def _format_simple(tx: Tracer, inst: Inst) -> None:
    tx.push(_format(tx, tx.pop(), 0, None))


@handler("FORMAT_WITH_SPEC", since=(3, 13))
def _format_with_spec(tx: Tracer, inst: Inst) -> None:
    spec = tx.pop()
    tx.push(_format(tx, tx.pop(), 0, spec))


@handler("BUILD_STRING")
def _build_string(tx: Tracer, inst: Inst) -> None:
    parts = tx.popn(inst.arg)
    tx.push(ConstVar("".join(part.const() for part in parts)))
