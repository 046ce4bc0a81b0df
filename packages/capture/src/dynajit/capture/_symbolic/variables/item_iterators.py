"""Iterators over known items, and Python's own iterator over a list object (``IteratorVar``).

An iterator over a list reads the list itself at each step, so items appended
while a loop runs are seen; it holds its position even past the end of a list
that shrank, and lets go of the list once it has ended, as Python's does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer
    from dynajit.capture._symbolic.variables.containers import ListVar

__all__ = ["IteratorVar", "list_iterator_at"]


class IteratorVar(VT):
    """An iterator over a known list of items (lists, tuples, ranges, dicts, zip, enumerate, ...)."""

    def __init__(self, items: list[VT], *, over: ListVar | None = None) -> None:
        # ``over``: iterate over that list itself, so appends made while iterating are seen (as in Python).
        self.over = over
        self.items = over.items if over is not None else list(items)
        self.position = 0
        self.exhausted = False  # Python's list iterator lets go of its list at its end: appends made later are not seen

    def python_type(self) -> type:
        return type(iter([]))

    def next(self) -> VT | None:
        if self.exhausted:
            return None
        if self.position >= len(self.items):
            self.exhausted = self.over is not None
            return None
        item = self.items[self.position]
        self.position += 1
        return item

    def unpack(self, tx: Tracer) -> list[VT]:
        rest = [] if self.exhausted else self.items[self.position :]
        self.position = len(self.items)
        self.exhausted = self.over is not None
        return rest

    def children(self) -> list[VT]:
        if self.over is not None:
            return [self.over]  # rebuilt as the whole list, advanced: the items already taken are needed too
        return self.items[self.position :]

    def reconstruct(self, cg: CodeGen) -> None:
        if self.over is not None:
            over = self.over

            def list_and_position() -> int:
                over.reconstruct(cg)
                cg.load_const(self.position)
                cg.load_const(self.exhausted)
                return 3

            cg.build_cached(self, lambda: cg.call_helper(list_iterator_at, list_and_position))
            return
        rest = self.items[self.position :]

        def tuple_of_rest() -> int:
            for item in rest:
                item.reconstruct(cg)
            cg.build("BUILD_TUPLE", len(rest))
            return 1

        # One object however many references to it are rebuilt (they share its position).
        cg.build_cached(self, lambda: cg.call_helper(iter, tuple_of_rest))


def list_iterator_at(items: list[Any], position: int, exhausted: bool) -> Any:
    """Python's iterator over the list object itself at ``position``, which may lie past the list's end when the
    list shrank after the iterator advanced (it then ends unless the list grows past it first)."""
    if exhausted:
        iterator = iter([])
        next(iterator, None)
        return iterator
    iterator, size = iter(items), len(items)
    # list_iterator.__setstate__ clamps to the list's size: the list is padded for that one call and cut back,
    # through list's own methods, so no subclass's override runs and the list ends as it was.
    list.extend(items, [None] * (position - size))
    try:
        iterator.__setstate__(position)
    finally:
        list.__delitem__(items, slice(size, None))
    return iterator
