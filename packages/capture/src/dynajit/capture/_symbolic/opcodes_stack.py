"""Opcode handlers: locals, globals, cells, constants, stack shuffling and returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynajit.capture._symbolic.registry import handler
from dynajit.capture._symbolic.variables import CellVar, NullVar, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer


@handler("NOP", "RESUME", "PRECALL", "EXTENDED_ARG", "CACHE", "NOT_TAKEN")
def _nop(tx: Tracer, inst: Inst) -> None:
    pass


@handler("POP_TOP")
def _pop_top(tx: Tracer, inst: Inst) -> None:
    tx.pop()


@handler("PUSH_NULL")
def _push_null(tx: Tracer, inst: Inst) -> None:
    tx.push(NullVar())


@handler("COPY")
def _copy(tx: Tracer, inst: Inst) -> None:
    tx.push(tx.stack[-inst.arg])


@handler("SWAP")
def _swap(tx: Tracer, inst: Inst) -> None:
    tx.stack[-1], tx.stack[-inst.arg] = tx.stack[-inst.arg], tx.stack[-1]


@handler("LOAD_CONST")
def _load_const(tx: Tracer, inst: Inst) -> None:
    tx.push(tx.wrap_const(inst.arg))


@handler("LOAD_FAST", "LOAD_FAST_CHECK")
def _load_fast(tx: Tracer, inst: Inst) -> None:
    if inst.arg in tx.cells:  # 3.13 loads a cell itself with LOAD_FAST to build a closure
        tx.push(tx.cells[inst.arg])
        return
    tx.push(tx.load_local(inst.arg))


@handler("LOAD_FAST_AND_CLEAR")
def _load_fast_and_clear(tx: Tracer, inst: Inst) -> None:
    tx.push(tx.load_local(inst.arg) if inst.arg in tx.locals else NullVar())
    tx.locals.pop(inst.arg, None)


@handler("LOAD_FAST_LOAD_FAST", since=(3, 13))
def _load_fast_load_fast(tx: Tracer, inst: Inst) -> None:
    for name in inst.arg:
        tx.push(tx.load_local(name))


@handler("STORE_FAST", "STORE_FAST_MAYBE_NULL")
def _store_fast(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    if isinstance(value, NullVar):
        tx.locals.pop(inst.arg, None)
    else:
        tx.locals[inst.arg] = value


@handler("STORE_FAST_LOAD_FAST", since=(3, 13))
def _store_fast_load_fast(tx: Tracer, inst: Inst) -> None:
    store, load = inst.arg
    tx.locals[store] = tx.pop()
    tx.push(tx.load_local(load))


@handler("STORE_FAST_STORE_FAST", since=(3, 13))
def _store_fast_store_fast(tx: Tracer, inst: Inst) -> None:
    first, second = inst.arg
    tx.locals[first] = tx.pop()
    tx.locals[second] = tx.pop()


@handler("DELETE_FAST")
def _delete_fast(tx: Tracer, inst: Inst) -> None:
    if inst.arg not in tx.locals:
        unsupported(f"deleting unbound local {inst.arg!r} raises UnboundLocalError")
    del tx.locals[inst.arg]


@handler("LOAD_GLOBAL")
def _load_global(tx: Tracer, inst: Inst) -> None:
    value = tx.load_global(inst.arg)
    if inst.push_null and tx.version < (3, 13):
        tx.push(NullVar())
    tx.push(value)
    if inst.push_null and tx.version >= (3, 13):
        tx.push(NullVar())


@handler("STORE_GLOBAL")
def _store_global(tx: Tracer, inst: Inst) -> None:
    tx.store_global(inst.arg, tx.pop())


@handler("MAKE_CELL")
def _make_cell(tx: Tracer, inst: Inst) -> None:
    name = inst.arg
    tx.cells[name] = CellVar(tx.load_local(name) if name in tx.locals else None)
    tx.locals.pop(name, None)


@handler("COPY_FREE_VARS")
def _copy_free_vars(tx: Tracer, inst: Inst) -> None:
    pass  # the tracer binds free variables when it sets up the frame


@handler("LOAD_CLOSURE", until=(3, 13))
def _load_closure(tx: Tracer, inst: Inst) -> None:
    tx.push(tx.cells[inst.arg])


@handler("LOAD_DEREF")
def _load_deref(tx: Tracer, inst: Inst) -> None:
    tx.push(tx.cells[inst.arg].get(tx))


@handler("STORE_DEREF")
def _store_deref(tx: Tracer, inst: Inst) -> None:
    tx.cells[inst.arg].set(tx, tx.pop())


@handler("RETURN_VALUE")
def _return_value(tx: Tracer, inst: Inst) -> None:
    tx.do_return(tx.pop())


@handler("RETURN_CONST", since=(3, 12))
def _return_const(tx: Tracer, inst: Inst) -> None:
    tx.do_return(tx.wrap_const(inst.arg))


@handler("KW_NAMES", until=(3, 13))
def _kw_names(tx: Tracer, inst: Inst) -> None:
    tx.kw_names = tuple(inst.arg)
