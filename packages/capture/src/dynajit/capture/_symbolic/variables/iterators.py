"""Lazy iterators of builtins: ``zip``, ``enumerate``, ``map``, ``filter``, ``iter(fn, sentinel)`` and ``reversed``.

As in Python, each item is taken from the underlying iterators only when the
consumer asks for it (``next``, a ``for`` loop's FOR_ITER), so generators
zipped together interleave their effects, and an iterator shared by two
arguments (``zip(it, it)``) is advanced by both. A lazy iterator live at a
graph break is rebuilt as the same builtin over its rebuilt sources (which
hold the items not taken yet), so the resumed code continues from the same
state. A ``for`` loop's iterator cut by a break is settled instead: when no
function is called to make its items (``zip``/``enumerate`` over known
sequences) and no one else holds what it reads (see :meth:`LazyIteratorVar.settle`),
its remaining items are taken now, which no one can observe, and the resumed
loop runs over them (as for any iterator over known items). ``reversed`` of a
list reads the list at each step, as Python's iterator does.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.containers import ListVar, TupleVar
from dynajit.capture._symbolic.variables.item_iterators import IteratorVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "CallIterVar",
    "EnumerateVar",
    "FilterVar",
    "LazyIteratorVar",
    "MapVar",
    "ReversedListIteratorVar",
    "ZipVar",
    "iterator_of",
    "python_error",
    "raise_as_python",
    "reversed_of",
]


def python_error(action: Any) -> BaseException:
    """The exception ``action()`` raises in Python (its message is Python's own, for this version)."""
    try:
        action()
    except Exception as exc:
        return exc
    raise AssertionError(f"{action} did not raise")


def raise_as_python(action: Any) -> NoReturn:
    """Stop tracing at a step that raises what ``action()`` raises; traced code may catch it."""
    error = python_error(action)
    raises_in_python(f"{type(error).__name__}: {error}", error)


def iterator_of(tx: Tracer, vt: VT) -> IteratorVar:
    """``iter(vt)``: an iterator is its own; a list is iterated in place (appends made meanwhile are seen)."""
    if isinstance(vt, IteratorVar):
        return vt
    from dynajit.capture._symbolic.variables.container_iterators import checked_iterator

    checked = checked_iterator(vt)  # a dict, a dict's view, a set or a deque: Python's iterator watches it
    if checked is not None:
        return checked
    if isinstance(vt, ListVar):
        return IteratorVar(vt.items, over=vt)
    from dynajit.capture._symbolic.variables.functions import call_dunder, python_dunder
    from dynajit.capture._symbolic.variables.new_objects import NewObjectVar
    from dynajit.capture._symbolic.variables.objects import UserObjectVar

    # A Python __iter__ (often a generator: Sequence's indexes until IndexError) gives the iterator itself: its
    # items are made as they are asked for, so they see what the loop body did meanwhile, in eager's order.
    made = None
    if isinstance(vt, UserObjectVar) and python_dunder(vt.value, "__iter__") is not None:
        made = call_dunder(tx, vt, "__iter__", [])
    elif isinstance(vt, NewObjectVar) and vt.python_method("__iter__") is not None:
        made = vt.call_python(tx, "__iter__", [])
    if made is not None:
        if isinstance(made, IteratorVar):
            return made
        return IteratorVar(made.unpack(tx))
    return IteratorVar(vt.unpack(tx))


class LazyIteratorVar(IteratorVar):
    """An iterator computing each item on demand from ``sources`` (and ``fn``, when it has one)."""

    kind: type = object  # the builtin the iterator is an instance of

    def __init__(self, output: OutputGraph, sources: list[IteratorVar], fn: VT | None = None) -> None:
        super().__init__([])
        self.output = output
        self.sources = sources
        self.fn = fn

    def python_type(self) -> type:
        return self.kind

    def _tx(self) -> Tracer:
        tx = self.output.current_tx
        assert tx is not None, "a lazy iterator advanced outside tracing"
        return tx

    def pull(self, tx: Tracer) -> VT | None:
        """The next item, taken from the sources now; None once exhausted."""
        raise NotImplementedError

    def next(self) -> VT | None:
        if self.settled:
            return super().next()
        return self.pull(self._tx())

    def unpack(self, tx: Tracer) -> list[VT]:
        if self.settled:
            return super().unpack(tx)
        items = []
        while (item := self.pull(tx)) is not None:
            items.append(item)
        return items

    settled = False  # its remaining items were all taken into ``items`` (see settle)

    def settle(self, shared: Callable[[VT], bool] = lambda source: False) -> bool:
        """Take every remaining item now, when no one can tell; False otherwise: when that would call a function,
        advance an iterator the frame also holds (``shared``), or read a list the rest may still change (one
        from outside the frame, or one the frame also holds).

        A settled iterator is an iterator over known items: a loop over it cut by a graph break resumes
        over those items.
        """
        if self.settled:
            return True
        pure = self.fn is None and all(
            not shared(s)
            and (
                (type(s) is IteratorVar and (s.over is None or (s.over.source is None and not shared(s.over))))
                or (isinstance(s, LazyIteratorVar) and s.settle(shared))
            )
            for s in self.sources
        )
        if not pure:
            return False
        rest = []
        while (item := self.pull(None)) is not None:  # type: ignore[arg-type]  # no function: no tracer needed
            rest.append(item)
        self.items, self.position, self.settled = rest, 0, True
        return True

    def children(self) -> list[VT]:
        if self.settled:
            return super().children()
        return [*self.sources, *([self.fn] if self.fn is not None else [])]

    def rebuild_arguments(self) -> list[VT | int]:
        """What the builtin is called with to rebuild this iterator (ints are loaded as constants)."""
        return [*([self.fn] if self.fn is not None else []), *self.sources]

    def rebuilder(self) -> Any:
        return self.kind

    def reconstruct(self, cg: CodeGen) -> None:
        if self.settled:
            super().reconstruct(cg)
            return

        def load_arguments() -> int:
            arguments = self.rebuild_arguments()
            for argument in arguments:
                if isinstance(argument, int):
                    cg.load_const(argument)
                else:
                    argument.reconstruct(cg)
            return len(arguments)

        # One object however many references to it are rebuilt (they share its position).
        cg.build_cached(self, lambda: cg.call_helper(self.rebuilder(), load_arguments))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.sources!r})"


def _zip_strict(*iterables: Any) -> Any:
    """``zip(*iterables, strict=True)``, callable with positional arguments only (for rebuilding)."""
    return zip(*iterables, strict=True)


class ZipVar(LazyIteratorVar):
    """``zip(*iterables, strict=...)``: a tuple of one item from each, in order, until one is exhausted."""

    kind = zip

    def __init__(self, output: OutputGraph, sources: list[IteratorVar], strict: bool) -> None:
        super().__init__(output, sources)
        self.strict = strict

    def pull(self, tx: Tracer) -> VT | None:
        if not self.sources:
            return None
        items = []
        for index, source in enumerate(self.sources):
            item = source.next()
            if item is None:
                if self.strict:
                    self._check_all_exhausted(index)
                return None
            items.append(item)
        return TupleVar(items)

    def _check_all_exhausted(self, index: int) -> None:
        if index > 0:
            shorter = [[0]] * index + [[]]  # argument index + 1 ends first: Python's own message for it
            raise_as_python(lambda: list(_zip_strict(*shorter)))
        for later, source in enumerate(self.sources[1:], start=1):
            if source.next() is not None:
                longer: list[list[int]] = [[]] * later + [[0]]
                raise_as_python(lambda longer=longer: list(_zip_strict(*longer)))

    def rebuilder(self) -> Any:
        return _zip_strict if self.strict else zip


class EnumerateVar(LazyIteratorVar):
    """``enumerate(iterable, start)``: (count, item) pairs."""

    kind = enumerate

    def __init__(self, output: OutputGraph, source: IteratorVar, start: int) -> None:
        super().__init__(output, [source])
        self.count = start

    def pull(self, tx: Tracer) -> VT | None:
        item = self.sources[0].next()
        if item is None:
            return None
        self.count += 1
        return TupleVar([ConstVar(self.count - 1), item])

    def rebuild_arguments(self) -> list[VT | int]:
        return [self.sources[0], self.count]


class MapVar(LazyIteratorVar):
    """``map(fn, *iterables)``: ``fn`` called (traced) on one item of each, until one is exhausted."""

    kind = map

    def pull(self, tx: Tracer) -> VT | None:
        if not self.sources:
            return None
        items = []
        for source in self.sources:
            item = source.next()
            if item is None:
                return None
            items.append(item)
        assert self.fn is not None
        return self.fn.call(tx, items, {})


class FilterVar(LazyIteratorVar):
    """``filter(fn, iterable)``: the items whose ``fn(item)`` (or the item itself, for None) is true."""

    kind = filter

    def pull(self, tx: Tracer) -> VT | None:
        assert self.fn is not None
        keep_true = self.fn.is_const() and self.fn.const() is None
        while (item := self.sources[0].next()) is not None:
            verdict = item if keep_true else self.fn.call(tx, [item], {})
            if verdict.truth(tx):
                return item
        return None


def reversed_of(tx: Tracer, vt: VT) -> IteratorVar:
    """``reversed(vt)``: a sequence's items last first; an iterator cannot be reversed (TypeError)."""
    if isinstance(vt, IteratorVar):
        name = vt.python_type().__name__
        raises_in_python(
            f"'{name}' object is not reversible (TypeError)", TypeError(f"'{name}' object is not reversible")
        )
    if isinstance(vt, ListVar):
        return ReversedListIteratorVar(vt)
    try:
        items = vt.unpack(tx)
    except Exception:
        unsupported(f"reversed() of {vt}")
    return IteratorVar(list(reversed(items)))


class ReversedListIteratorVar(IteratorVar):
    """``reversed(a_list)``: Python's iterator holds an index into the list itself, from its last item down;
    each step reads the list as it is then and ends for good once the index is not inside it (a list that
    shrank below the index ends the loop)."""

    def __init__(self, over: ListVar) -> None:
        super().__init__([], over=over)
        self.index = len(self.items) - 1

    def python_type(self) -> type:
        return type(reversed([]))

    def next(self) -> VT | None:
        if 0 <= self.index < len(self.items):
            self.index -= 1
            return self.items[self.index + 1]
        self.index = -1
        return None

    def unpack(self, tx: Tracer) -> list[VT]:
        rest = []
        while (item := self.next()) is not None:
            rest.append(item)
        return rest

    def reconstruct(self, cg: CodeGen) -> None:
        over = self.over
        assert over is not None

        def list_and_index() -> int:
            over.reconstruct(cg)
            cg.load_const(self.index)
            return 2

        cg.build_cached(self, lambda: cg.call_helper(_reversed_list_iterator_at, list_and_index))


def _reversed_list_iterator_at(items: list[Any], index: int) -> Any:
    """Python's ``reversed(items)`` at ``index`` (exhausted when the index is not inside the list)."""
    iterator = reversed(items)
    if 0 <= index < len(items):
        iterator.__setstate__(index)
    else:
        for _ in iterator:
            pass
    return iterator


class CallIterVar(LazyIteratorVar):
    """``iter(fn, sentinel)``: ``fn()`` called (traced) for each item until a result equals ``sentinel``.

    Python compares with ``==`` after an identity check, and once the sentinel is met the iterator stays
    exhausted without calling ``fn`` again.
    """

    kind = type(iter(int, 0))

    def __init__(self, output: OutputGraph, fn: VT, sentinel: VT) -> None:
        super().__init__(output, [], fn)
        self.sentinel = sentinel

    def pull(self, tx: Tracer) -> VT | None:
        from dynajit.capture._symbolic.opcodes_ops import apply_operator, identical
        from dynajit.capture._symbolic.variables.tensor import TensorVar

        assert self.fn is not None
        item = self.fn.call(tx, [], {})
        if identical(item, self.sentinel, tx):
            equal = True
        elif any(isinstance(v, TensorVar) for v in (item, self.sentinel)) and any(
            v.is_const() and v.const() is None for v in (item, self.sentinel)
        ):
            equal = False  # a tensor's __eq__ with None falls back to identity
        else:
            equal = apply_operator(tx, operator.eq, [item, self.sentinel]).truth(tx)
        if equal:
            self.items, self.position, self.settled = [], 0, True  # exhausted for good: fn is not called again
            return None
        return item

    def settle(self) -> bool:
        return self.settled  # its items come from calls: they cannot be taken ahead of the loop

    def children(self) -> list[VT]:
        return [*super().children(), *([] if self.settled else [self.sentinel])]

    def rebuild_arguments(self) -> list[VT | int]:
        assert self.fn is not None
        return [self.fn, self.sentinel]

    def rebuilder(self) -> Any:
        return iter
