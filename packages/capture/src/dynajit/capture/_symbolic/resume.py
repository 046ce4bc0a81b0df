"""Resume functions: the rest of a function after a graph break, and which locals they need.

A resume function's code is the original code with a prologue that puts the
saved stack back (its first arguments; NULL slots are pushed again) and jumps
to the instruction where execution continues. Its remaining arguments are the
live locals, under their own names. Resume code objects are made once per
(code, target, stack layout, live locals), so a break in a loop reuses them.
"""

from __future__ import annotations

import itertools
import types
from typing import Any

import bytecode

from dynajit.capture._symbolic.instructions import Inst

__all__ = ["live_locals", "resume_code"]

_resume_ids = itertools.count()
_cache: dict[tuple[Any, ...], tuple[str, types.CodeType]] = {}

_STOPS = frozenset(
    {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP",
     "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_NO_INTERRUPT"}
)  # fmt: skip
# The saved stack arrives in arguments named ``___stack<i>``; only the prologue reads them.
_STACK_PREFIX = "___stack"
_READS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST", "LOAD_DEREF", "LOAD_CLOSURE"})


def _read_names(inst: Inst) -> list[str]:
    if inst.opname in _READS:
        return [inst.arg]
    if inst.opname == "LOAD_FAST_LOAD_FAST":
        return list(inst.arg)
    if inst.opname == "STORE_FAST_LOAD_FAST":
        return [inst.arg[1]]
    return []


def live_locals(insts: list[Inst], start: int, candidates: set[str]) -> list[str]:
    """Locals among ``candidates`` that code reachable from ``start`` may read (a safe over-approximation).

    A resume function's stack arguments are never live: its prologue, the only code that reads
    them, runs before the body. (Counting them made a break in a resume function with a try block
    pass them again as live locals, under the names of its new resume function's stack arguments.)
    """
    seen: set[int] = set()
    pending = [start]
    read: set[str] = set()
    touches_try = False
    while pending:
        index = pending.pop()
        if index in seen or index >= len(insts):
            continue
        seen.add(index)
        inst = insts[index]
        touches_try |= inst.in_try
        read.update(_read_names(inst))
        if inst.target is not None:
            pending.append(inst.target)
        if inst.opname not in _STOPS:
            pending.append(index + 1)
    if touches_try:  # an exception handler may read anything
        read.update(name for inst in insts for name in _read_names(inst))
    return sorted(name for name in read & candidates if not name.startswith(_STACK_PREFIX))


def resume_code(
    code: types.CodeType, target: Inst, stack_nulls: tuple[bool, ...], live: tuple[str, ...]
) -> tuple[str, types.CodeType]:
    """The name and code of the function that continues ``code`` at ``target``."""
    key = (code, target.index, stack_nulls, live)
    if key in _cache:
        return _cache[key]
    name = f"__resume_at_{target.offset}_{next(_resume_ids)}"
    bc = bytecode.Bytecode.from_code(code)
    entry = bytecode.Label()
    body: list[Any] = []
    prologue: list[Any] = []
    in_prefix = True
    index = 0
    lineno = target.lineno or code.co_firstlineno
    for item in bc:
        if isinstance(item, bytecode.Instr):
            if in_prefix:
                prologue.append(item)
                if item.name == "RESUME":
                    in_prefix = False
                    stack_args = _push_stack(stack_nulls, lineno)
                    prologue.extend(stack_args)
                    prologue.append(bytecode.Instr("JUMP_FORWARD", entry, lineno=lineno))
                index += 1
                continue
            if index == target.index:
                body.append(entry)
            index += 1
        body.append(item)
    stack_names = [f"{_STACK_PREFIX}{i}" for i, null in enumerate(stack_nulls) if not null]
    argnames = [*stack_names, *live]
    if len(set(argnames)) != len(argnames):  # a repeated name would shift every later argument
        raise ValueError(f"resume function {name}: repeated argument names in {argnames}")
    new = bytecode.Bytecode([*prologue, *body])
    new._copy_attr_from(bc)
    new.argnames = argnames
    new.argcount = len(argnames)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.flags = bc.flags & ~(0x04 | 0x08)  # no *args / **kwargs
    new.name = name
    new.qualname = name
    result = (name, new.to_code())
    _cache[key] = result
    return result


def _push_stack(stack_nulls: tuple[bool, ...], lineno: int) -> list[bytecode.Instr]:
    out = []
    for i, null in enumerate(stack_nulls):
        if null:
            out.append(bytecode.Instr("PUSH_NULL", lineno=lineno))
        else:
            out.append(bytecode.Instr("LOAD_FAST", f"{_STACK_PREFIX}{i}", lineno=lineno))
    return out
