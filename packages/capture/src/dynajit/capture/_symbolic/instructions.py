"""One instruction model over CPython 3.11, 3.12 and 3.13, decoded with the ``bytecode`` package.

Each :class:`Inst` keeps the raw ``bytecode.Instr`` (for re-assembly) and adds what
the interpreter needs: its index, its ``dis`` offset, the index of its jump
target, whether an exception-table range covers it, and a normalised argument
(LOAD_GLOBAL's push-NULL bit and LOAD_ATTR's method bit split off, comparison and
binary operators as names, jump labels resolved).
"""

from __future__ import annotations

import dis
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import bytecode

__all__ = ["PY", "Inst", "decode", "jump_opnames", "split_local_pairs"]

PY = sys.version_info[:2]


@dataclass
class Inst:
    """One decoded instruction."""

    index: int
    opname: str
    arg: Any
    offset: int
    lineno: int | None
    raw: bytecode.Instr
    position: int  # index of ``raw`` in the abstract Bytecode list
    target: int | None = None
    in_try: bool = False
    push_null: bool = False  # LOAD_GLOBAL's low bit
    method: bool = False  # LOAD_ATTR's low bit (3.12+) or LOAD_METHOD (3.11)
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"{self.offset:>4} {self.opname} {self.arg!r}"


def jump_opnames() -> frozenset[str]:
    """Names of the instructions that may jump."""
    return frozenset(dis.opname[op] for op in dis.hasjrel + dis.hasjabs if op < len(dis.opname))


def _normalise(name: str, arg: Any, inst: Inst) -> Any:
    if name == "LOAD_GLOBAL" and isinstance(arg, tuple):
        inst.push_null, arg = arg
    elif name == "LOAD_ATTR" and isinstance(arg, tuple):
        inst.method, arg = arg
    elif name == "LOAD_METHOD":
        inst.method = True
    elif name == "LOAD_SUPER_ATTR" and isinstance(arg, tuple):
        inst.method, _, arg = arg
    elif name == "COMPARE_OP":
        arg = {"LT": "<", "LE": "<=", "EQ": "==", "NE": "!=", "GT": ">", "GE": ">="}[arg.name.split("_")[0]]
        inst.extra["cast"] = "CAST" in getattr(inst.raw.arg, "name", "")
    elif name == "BINARY_OP":
        arg = arg.name if hasattr(arg, "name") else dis._nb_ops[arg][0]  # type: ignore[attr-defined]
    elif isinstance(arg, (bytecode.CellVar, bytecode.FreeVar)):
        arg = arg.name
    return arg


# 3.13's instructions on two locals give each local four bits of the argument (``Python/bytecodes.c``): code
# assembled with its locals numbered anew (a resume function takes the saved stack first) may put one past 15,
# which the pair cannot name (``LOAD_FAST_LOAD_FAST (15, 16)`` encoded as (16, 0) loaded another local).
_LOCAL_PAIRS = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}


def split_local_pairs(item: Any) -> list[Any]:
    """``item`` (a ``bytecode`` instruction, label or marker) as the instructions it stands for: a 3.13
    instruction on two locals as its two single-local instructions, anything else as itself."""
    pair = _LOCAL_PAIRS.get(item.name) if isinstance(item, bytecode.Instr) else None
    if pair is None:
        return [item]
    first, second = item.arg
    return [
        bytecode.Instr(pair[0], first, location=item.location),
        bytecode.Instr(pair[1], second, location=item.location),
    ]


def _dis_offsets(code: types.CodeType) -> list[int]:
    return [i.offset for i in dis.get_instructions(code) if i.opname not in ("EXTENDED_ARG", "CACHE")]


def decode(code: types.CodeType) -> tuple[bytecode.Bytecode, list[Inst]]:
    """Decode ``code`` into its abstract Bytecode and the interpreter's instruction list."""
    bc = bytecode.Bytecode.from_code(code)
    offsets = _dis_offsets(code)
    insts: list[Inst] = []
    label_at: dict[int, int] = {}  # id(label) -> index of the next instruction
    pending: list[bytecode.Label] = []
    try_depth = 0
    for position, item in enumerate(bc):
        if isinstance(item, bytecode.Label):
            pending.append(item)
            continue
        if isinstance(item, bytecode.TryBegin):
            try_depth += 1
            continue
        if isinstance(item, bytecode.TryEnd):
            try_depth -= 1
            continue
        if not isinstance(item, bytecode.Instr):
            continue
        index = len(insts)
        for label in pending:
            label_at[id(label)] = index
        pending.clear()
        offset = offsets[index] if len(offsets) > index else index * 2
        inst = Inst(index, item.name, None, offset, item.lineno, item, position, in_try=try_depth > 0)
        inst.arg = _normalise(item.name, item.arg, inst)
        insts.append(inst)
    for label in pending:
        label_at[id(label)] = len(insts)
    for inst in insts:
        if isinstance(inst.raw.arg, bytecode.Label):
            inst.target = label_at[id(inst.raw.arg)]
            inst.arg = inst.target
    return bc, insts
