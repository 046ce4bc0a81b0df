"""Graph breaks inside ``try`` and ``with`` blocks: the exception-table region around a break, and block exits.

A resume function is the original code, exception table included, so the rest
of a block it resumes in keeps its handlers. What the transformed frame must
add is the break instruction's own protection: it runs inside a try region of
the transformed code whose handler passes the exception to a *raise-resume*
function, which pushes the stack the region's handler expects, raises the
exception again inside a copy of the region, and so reaches the original
``except`` / ``finally`` / ``with`` cleanup code, which then runs in Python.

A grad-mode ``with`` block keeps its ``__exit__`` on the stack while its body
runs. At a break inside it, the transformed code sets the real grad mode the
traced code had reached (backends need not run the graph's grad-mode nodes)
and the resume function's prologue pushes a :class:`GradModeRestore` for the
exit: called by the block's normal end or by its exception handler, it sets
the mode back. Tracing a resume function reads it as the traced grad-mode exit.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass
from typing import Any

import torch

from dynajit.capture._symbolic.instructions import Inst

__all__ = ["GRAD_EXITS", "GRAD_EXIT_GLOBALS", "GradModeRestore", "Region", "exception_entries", "region_of"]


class GradModeRestore:
    """The ``__exit__`` of a grad-mode block a graph break cut: leaving the block sets the mode it found."""

    __slots__ = ("previous",)

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __call__(self, *exc_info: Any) -> None:
        torch._C._set_grad_enabled(self.previous)

    def __repr__(self) -> str:
        return f"GradModeRestore(previous={self.previous})"


# The prologue of a resume function loads its grad-mode exit from these globals of the frame's module.
GRAD_EXIT_GLOBALS = {previous: f"__dynajit_grad_exit_{int(previous)}" for previous in (False, True)}
GRAD_EXITS = {name: GradModeRestore(previous) for previous, name in GRAD_EXIT_GLOBALS.items()}


@dataclass(frozen=True)
class Region:
    """The exception-table entry covering an instruction: its handler and what the handler expects."""

    handler: int  # index of the handler's first instruction
    depth: int  # the stack depth the handler unwinds to
    push_lasti: bool


def exception_entries(code: types.CodeType) -> list[Any]:
    """``code``'s exception table: entries with start, end, target (offsets), depth and lasti."""
    return list(dis.Bytecode(code).exception_entries)  # type: ignore[attr-defined]  # 3.11+, not in typeshed


def region_of(code: types.CodeType, insts: list[Inst], inst: Inst) -> Region | None:
    """The exception-table region covering ``inst`` (regions of one code object do not overlap)."""
    if not inst.in_try:
        return None
    by_offset = {i.offset: i.index for i in insts}
    for entry in exception_entries(code):
        if entry.start <= inst.offset < entry.end and entry.target in by_offset:
            return Region(by_offset[entry.target], entry.depth, bool(entry.lasti))
    return None
