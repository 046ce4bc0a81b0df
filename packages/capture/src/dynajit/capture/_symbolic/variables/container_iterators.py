"""Iterators over dicts (and their views), sets and deques, which Python's own iterators watch.

Python's iterator over a dict or a set raises ``RuntimeError`` at its next step once the container changed
size, and a deque's once it was changed at all (an item replaced, or the deque reversed, excepted). Between
those, a dict's iterator reads the dict as it is then: a value written ahead of the loop is the one the loop
gets. This iterator does the same over the tracker: each item is read from the container when the loop asks
for it, and a change Python refuses raises what Python raises. A dict or set whose keys changed while its size
did not is iterated in an order that depends on its memory layout: the frame runs in Python.

At a graph break it is rebuilt as a :class:`WatchedIteration` over the rebuilt dict or set, which the resumed
code traces again (a deque: as Python's own iterator, advanced as far); or, when the container has already
changed, as an iterator raising Python's error at its first step. A resumed trace knows the keys the loop
started with (they are the container's when it is handed over), so a change of keys at the same size there
also runs the frame in Python, where the :class:`WatchedIteration` steps Python's own iterator.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dynajit.capture._frame import SkipFrame
from dynajit.capture._symbolic.paths import Attr, Path
from dynajit.capture._symbolic.variables.base import VT, unsupported
from dynajit.capture._symbolic.variables.collections_ import DequeVar
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.containers import DictVar, DictViewVar, SetVar, TupleVar
from dynajit.capture._symbolic.variables.item_iterators import IteratorVar
from dynajit.capture._symbolic.variables.iterators import python_error, raise_as_python

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["CheckedIteratorVar", "WatchedIteration", "checked_iterator", "watched", "wrap_watched_iteration"]


def _grow_dict() -> None:
    d = {0: 0}
    for key in d:
        d[key + 1] = 0


def _grow_set() -> None:
    s = {0}
    for item in s:
        s.add(item + 1)


def _append_to_deque() -> None:
    q = collections.deque([0])
    for item in q:
        q.append(item)


def checked_iterator(vt: VT) -> CheckedIteratorVar | None:
    """The watched iterator ``iter(vt)`` gives for a dict, a dict's view, a set or a deque tracker, else None."""
    if isinstance(vt, DictVar):
        return CheckedIteratorVar(vt, "keys", vt.kind)
    if isinstance(vt, DictViewVar) and isinstance(vt.owner, DictVar) and vt.mapping is vt.owner.items:
        return CheckedIteratorVar(vt.owner, vt.kind, vt.base)
    if isinstance(vt, (SetVar, DequeVar)):
        return CheckedIteratorVar(vt, "items", vt.python_type())
    return None


def watched(vt: VT) -> bool:
    """Whether ``vt`` is rebuilt at a break as a :class:`WatchedIteration` (which a resume function traces)."""
    return (
        isinstance(vt, CheckedIteratorVar)
        and not isinstance(vt.container, DequeVar)
        and not vt.done
        and vt.refused_change() is None
    )


class CheckedIteratorVar(IteratorVar):
    """``iter(container)``: ``kind`` is ``keys``, ``values`` or ``items`` of a dict (made by ``base``'s method:
    dict's or OrderedDict's), or ``items`` of a set or a deque. ``size``: the container's size when Python made
    its iterator, where a resumed loop continues one; its keys then are the container's now (a
    :class:`WatchedIteration` is handed over only while they are)."""

    def __init__(
        self, container: DictVar | SetVar | DequeVar, kind: str, base: type, position: int = 0, size: int | None = None
    ) -> None:
        super().__init__([])
        self.container, self.kind, self.base, self.position = container, kind, base, position
        self.start = self._state()
        self.start_size = len(self._live()) if size is None else size
        self.done = False  # an exhausted iterator stays so, whatever happens to the container

    def python_type(self) -> type:
        if isinstance(self.container, DictVar):
            return type(iter(getattr(self.base(), self.kind)()))
        return type(iter(self.base()))

    def _state(self) -> Any:
        if isinstance(self.container, DequeVar):
            return self.container.state
        if isinstance(self.container, SetVar):
            return frozenset(self.container.values)
        return tuple(self.container.items)

    def _live(self) -> list[VT]:
        container = self.container
        if isinstance(container, DequeVar):
            return container.items
        if isinstance(container, SetVar):
            return [ConstVar(value) for value in container.values]
        if self.kind == "keys":
            return [ConstVar(key) for key in container.items]
        if self.kind == "values":
            return list(container.items.values())
        return [TupleVar([ConstVar(key), value]) for key, value in container.items.items()]

    def refused_change(self) -> Callable[[], None] | None:
        """What raises the error Python's iterator raises now (None: nothing changed); a change of keys that
        kept the size ends the trace."""
        now = self._state()
        if isinstance(self.container, DequeVar):
            return None if now == self.start else _append_to_deque
        if len(now) != self.start_size:
            return _grow_set if isinstance(self.container, SetVar) else _grow_dict
        if now == self.start:
            return None
        kind = "set" if isinstance(self.container, SetVar) else "dict"
        raise SkipFrame(
            f"a {kind}'s keys changed while a loop iterated over it, its size did not: which keys Python yields "
            "next depends on its memory layout; the frame runs in Python"
        )

    def next(self) -> VT | None:
        if self.done:
            return None
        refused = self.refused_change()
        if refused is not None:
            raise_as_python(refused)
        live = self._live()
        if self.position >= len(live):
            self.done = True
            return None
        self.position += 1
        return live[self.position - 1]

    def unpack(self, tx: Tracer) -> list[VT]:
        rest = []
        while (item := self.next()) is not None:
            rest.append(item)
        return rest

    def children(self) -> list[VT]:
        return [self.container]

    def reconstruct(self, cg: CodeGen) -> None:
        if self.done:
            cg.build_cached(self, lambda: cg.call_helper(iter, lambda: cg.build("BUILD_TUPLE", 0) or 1))
            return
        refused = self.refused_change()
        if refused is not None:
            error = python_error(refused)

            def error_arguments() -> int:
                cg.load_const_any(type(error))
                cg.load_const(str(error))
                return 2

            cg.build_cached(self, lambda: cg.call_helper(_failing_iterator, error_arguments))
            return

        if isinstance(self.container, DequeVar):

            def deque_and_position() -> int:
                self.container.reconstruct(cg)
                cg.load_const(self.position)
                return 2

            cg.build_cached(self, lambda: cg.call_helper(_iterator_at, deque_and_position))
            return

        def watched_arguments() -> int:
            self.container.reconstruct(cg)
            cg.load_const_any(self.base)
            cg.load_const(self.kind)
            cg.load_const(self.position)
            cg.load_const(self.start_size)
            return 5

        cg.build_cached(self, lambda: cg.call_helper(WatchedIteration, watched_arguments))


def wrap_watched_iteration(output: OutputGraph, value: WatchedIteration, path: Path | None) -> CheckedIteratorVar:
    """A :class:`WatchedIteration` a resumed loop continues: its container traced, its position and the size it
    expects guarded (each is a constant of the trace). It is rebuilt at every break, never written back."""
    from dynajit.capture._symbolic.wrap import wrap_value

    if path is None or value.done:
        unsupported("a watched loop iterator not reached from the frame, or exhausted")
    output.guard("type_match", path, value)
    for name in ("kind", "position", "size", "done"):
        output.guard("constant_match", Attr(path, name), getattr(value, name))
    output.guard("id_match", Attr(path, "base"), value.base)
    container = wrap_value(output, value.container, Attr(path, "container"))
    if not isinstance(container, (DictVar, SetVar)):
        unsupported(f"a watched loop iterator over a {type(value.container).__name__}")
    return CheckedIteratorVar(container, value.kind, value.base, value.position, value.size)


class WatchedIteration:
    """The rest of a loop over a dict's keys, values or items (``getattr(base, kind)``) or a set that a graph
    break cut, handed over while the container's keys are those the loop started with: what a resume function
    traces (its ``position`` and ``size`` guarded). Run in Python, it is Python's own iterator over the
    container advanced ``position`` items, so a change of keys at the same size behaves as the layout of the
    container makes it behave."""

    __slots__ = ("base", "container", "done", "iterator", "kind", "position", "size")

    def __init__(self, container: Any, base: type, kind: str, position: int, size: int) -> None:
        self.container, self.base, self.kind, self.position, self.size = container, base, kind, position, size
        self.done = False
        view = container if issubclass(base, (set, frozenset)) else getattr(base, kind)(container)
        self.iterator = _iterator_at(view, position)

    def __iter__(self) -> WatchedIteration:
        return self

    def __next__(self) -> Any:
        if self.done:
            raise StopIteration
        try:
            item = next(self.iterator)
        except StopIteration:
            self.done = True
            raise
        self.position += 1
        return item


def _iterator_at(container: Any, position: int) -> Iterator[Any]:
    """Python's iterator over ``container``, advanced ``position`` items."""
    iterator = iter(container)
    for _ in range(position):
        next(iterator)
    return iterator


def _failing_iterator(kind: type[BaseException], message: str) -> Iterator[Any]:
    """An iterator raising ``kind(message)`` at its first step, as Python's does over a changed container."""
    raise kind(message)
    yield  # (a generator: nothing runs until the first step)
