"""Opcode handlers: building and unpacking tuples, lists, sets, dicts and slices."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynajit.capture._symbolic.registry import handler
from dynajit.capture._symbolic.variables import (
    VT,
    DictVar,
    ListVar,
    SetVar,
    SliceVar,
    TensorVar,
    TupleVar,
    unsupported,
)

if TYPE_CHECKING:
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer


@handler("BUILD_TUPLE")
def _build_tuple(tx: Tracer, inst: Inst) -> None:
    tx.push(TupleVar(tx.popn(inst.arg)))


@handler("BUILD_LIST")
def _build_list(tx: Tracer, inst: Inst) -> None:
    tx.push(ListVar(tx.popn(inst.arg)))


@handler("BUILD_SET")
def _build_set(tx: Tracer, inst: Inst) -> None:
    tx.push(SetVar(tx.popn(inst.arg)))


@handler("BUILD_MAP")
def _build_map(tx: Tracer, inst: Inst) -> None:
    flat = tx.popn(2 * inst.arg)
    tx.push(DictVar({flat[i].const(): flat[i + 1] for i in range(0, len(flat), 2)}))


@handler("BUILD_CONST_KEY_MAP", until=(3, 14))
def _build_const_key_map(tx: Tracer, inst: Inst) -> None:
    keys = tx.pop().const()
    values = tx.popn(inst.arg)
    tx.push(DictVar(dict(zip(keys, values))))


@handler("BUILD_SLICE")
def _build_slice(tx: Tracer, inst: Inst) -> None:
    tx.push(SliceVar(tx.popn(inst.arg)))


def _building(tx: Tracer, target: VT) -> VT:
    """The container a comprehension or display is building, its change recorded when it comes from outside
    the trace: a resume function takes the list of a comprehension a break cut as an argument, and an append
    that only changed the tracker was lost (``[f(x) for x in xs]`` with a break in ``f`` returned ``[]``)."""
    if target.source is not None:
        if not isinstance(target, (ListVar, DictVar)):
            unsupported(f"adding to a {target.python_type().__name__} the frame did not make")
        target.mutated(tx)
    return target


@handler("LIST_APPEND")
def _list_append(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    _building(tx, tx.stack[-inst.arg]).items.append(value)  # type: ignore[attr-defined]


@handler("LIST_EXTEND")
def _list_extend(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    _building(tx, tx.stack[-inst.arg]).items.extend(value.unpack(tx))  # type: ignore[attr-defined]


@handler("SET_ADD")
def _set_add(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    _building(tx, tx.stack[-inst.arg]).values.add(value.const())  # type: ignore[attr-defined]


@handler("SET_UPDATE")
def _set_update(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    _building(tx, tx.stack[-inst.arg]).values.update(v.const() for v in value.unpack(tx))  # type: ignore[attr-defined]


@handler("MAP_ADD")
def _map_add(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    key = tx.pop()
    _building(tx, tx.stack[-inst.arg]).items[key.const()] = value  # type: ignore[attr-defined]


@handler("DICT_UPDATE", "DICT_MERGE")
def _dict_update(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    if not isinstance(value, DictVar):
        unsupported(f"merging {value} into a dict")
    target = _building(tx, tx.stack[-inst.arg])
    if inst.opname == "DICT_MERGE" and set(value.items) & set(target.items):  # type: ignore[attr-defined]
        unsupported("duplicate keyword argument raises TypeError")
    target.items.update(value.items)  # type: ignore[attr-defined]


def _unpack(tx: Tracer, value: object) -> list:
    if isinstance(value, TensorVar):
        return value.unpack(tx)
    return value.unpack(tx)  # type: ignore[attr-defined]


@handler("UNPACK_SEQUENCE")
def _unpack_sequence(tx: Tracer, inst: Inst) -> None:
    items = _unpack(tx, tx.pop())
    if len(items) != inst.arg:
        unsupported(f"unpacking {len(items)} values into {inst.arg} raises ValueError")
    for item in reversed(items):
        tx.push(item)


@handler("UNPACK_EX")
def _unpack_ex(tx: Tracer, inst: Inst) -> None:
    before, after = inst.arg & 0xFF, inst.arg >> 8
    items = _unpack(tx, tx.pop())
    if len(items) < before + after:
        unsupported("not enough values to unpack raises ValueError")
    middle = ListVar(items[before : len(items) - after])
    for item in reversed([*items[:before], middle, *items[len(items) - after :]]):
        tx.push(item)
