"""``itertools`` while tracing: Python's own itertools run over trackers, driven lazily by the consumer.

Each itertools call is made for real, with its arguments adapted: an
iterable becomes a Python generator that takes the tracked iterator's next
item only when itertools asks for it, a function becomes a callable that
traces the call, and a constant stays itself. The real itertools object then
decides every step exactly as in eager (how far ``islice`` consumes, when
``zip_longest`` fills, how ``groupby`` shares its input with its groups), and
each item it yields is a tracker. Values itertools itself tests (a
predicate's result, a ``groupby`` key compared with ``==``, a ``compress``
selector) are wrapped so that their truth and equality are traced: constants
fold, symbolic sizes are guarded, tensors compared by value are a graph break.

``product``, ``permutations``, ``combinations`` and
``combinations_with_replacement`` take all of their inputs when called (as
their C implementations do) and then hold only known items, so they are
plain iterators over those items, rebuilt at a graph break. The lazy ones
hold a live Python iterator: one still live at a graph break cannot be
rebuilt, and the frame runs in Python there.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from dynajit.capture._frame import Unsupported
from dynajit.capture._symbolic.variables import VT, ConstVar, IteratorVar, TupleVar, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.iterators import iterator_of

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["ITERTOOLS", "PythonIteratorVar"]

Handler = Callable[["Tracer", list[VT], dict[str, VT]], VT]
_END = object()


def _current(output: OutputGraph) -> Tracer:
    tx = output.current_tx
    assert tx is not None, "an itertools object advanced outside tracing"
    return tx


class _Traced:
    """A tracker handed to itertools where it tests the value: truth and ``==`` are traced."""

    __slots__ = ("output", "vt")

    def __init__(self, output: OutputGraph, vt: VT) -> None:
        self.output, self.vt = output, vt

    def __bool__(self) -> bool:
        return self.vt.truth(_current(self.output))

    def __eq__(self, other: object) -> bool:
        from dynajit.capture._symbolic.opcodes_ops import apply_operator

        tx = _current(self.output)
        return apply_operator(tx, operator.eq, [self.vt, _unwrap(other)]).truth(tx)  # type: ignore[arg-type]

    __hash__ = None  # type: ignore[assignment]


def _unwrap(value: Any) -> Any:
    return value.vt if isinstance(value, _Traced) else value


def _pull(iterator: IteratorVar, traced: OutputGraph | None = None) -> Iterator[Any]:
    """The items of ``iterator``, each taken when asked for (wrapped for tests when ``traced``)."""
    while (item := iterator.next()) is not None:
        yield item if traced is None else _Traced(traced, item)


def _pull_iterables(output: OutputGraph, outer: IteratorVar) -> Iterator[Any]:
    """``chain.from_iterable``'s input: each item made an iterator when itertools reaches it."""
    while (item := outer.next()) is not None:
        yield _pull(iterator_of(_current(output), item))


def _pull_argument_tuples(output: OutputGraph, iterator: IteratorVar) -> Iterator[Any]:
    """``starmap``'s input: each item unpacked into the arguments of one call."""
    while (item := iterator.next()) is not None:
        yield tuple(item.unpack(_current(output)))


def _traced_function(output: OutputGraph, fn: VT) -> Callable[..., Any]:
    def call(*args: Any) -> _Traced:
        return _Traced(output, fn.call(_current(output), [_unwrap(a) for a in args], {}))

    return call


def _traced_add(output: OutputGraph) -> Callable[[Any, Any], Any]:
    from dynajit.capture._symbolic.opcodes_ops import apply_operator

    def add(total: Any, item: Any) -> _Traced:
        return _Traced(output, apply_operator(_current(output), operator.add, [_unwrap(total), _unwrap(item)]))

    return add


def _to_tracker(value: Any, output: OutputGraph) -> VT:
    """What an itertools object yielded, as a tracker."""
    if isinstance(value, VT):
        return value
    if isinstance(value, _Traced):
        return value.vt
    if isinstance(value, tuple):
        return TupleVar([_to_tracker(v, output) for v in value])
    if value is None or isinstance(value, (int, float)):
        return ConstVar(value)  # count()'s numbers, zip_longest's default fill
    if isinstance(value, Iterator):
        return PythonIteratorVar(value, output)  # a groupby group
    unsupported(f"itertools yielded {type(value).__name__}, which is not tracked")


class PythonIteratorVar(IteratorVar):
    """A real itertools object over adapted trackers: each ``next`` runs it one step."""

    def __init__(self, real: Iterator[Any], output: OutputGraph) -> None:
        super().__init__([])
        self.real = real
        self.output = output

    def python_type(self) -> type:
        return type(self.real)

    def next(self) -> VT | None:
        try:
            value = next(self.real, _END)
        except Unsupported:
            raise
        except Exception as exc:  # raised by itertools itself (a bad argument found while iterating)
            raises_in_python(f"itertools raises {type(exc).__name__}: {exc}", exc)
        return None if value is _END else _to_tracker(value, self.output)

    def unpack(self, tx: Tracer) -> list[VT]:
        items = []
        while (item := self.next()) is not None:
            items.append(item)
            if len(items) > 10_000:
                unsupported("an itertools iterator gave more than 10000 items while tracing")
        return items

    def children(self) -> list[VT]:
        return []

    def reconstruct(self, cg: CodeGen) -> None:
        unsupported(f"an itertools.{type(self.real).__name__} object live while tracing cannot be rebuilt in Python")

    def __repr__(self) -> str:
        return f"PythonIteratorVar({type(self.real).__name__})"


# How each argument is adapted: "iter" (taken lazily), "iters" (an iterable of iterables), "args" (an
# iterable of argument tuples), "test" (items whose truth itertools tests), "fn" (a traced function),
# "add" (a function, None meaning +), "key"/"test_fn" (a function, None meaning the item itself),
# "const" (a constant), "value" (the tracker itself).
_SPECS: dict[Any, tuple[tuple[str, ...], str | None, dict[str, str]]] = {
    itertools.chain: ((), "iter", {}),
    itertools.chain.from_iterable: (("iters",), None, {}),
    itertools.islice: (("iter",), "const", {}),
    itertools.zip_longest: ((), "iter", {"fillvalue": "value"}),
    itertools.cycle: (("iter",), None, {}),
    itertools.pairwise: (("iter",), None, {}),
    itertools.count: (("const", "const"), None, {"start": "const", "step": "const"}),
    itertools.repeat: (("value", "const"), None, {"object": "value", "times": "const"}),
    itertools.accumulate: (("iter", "add"), None, {"func": "add", "initial": "value"}),
    itertools.starmap: (("fn", "args"), None, {}),
    itertools.groupby: (("iter", "key"), None, {"key": "key"}),
    itertools.takewhile: (("fn", "iter"), None, {}),
    itertools.dropwhile: (("fn", "iter"), None, {}),
    itertools.filterfalse: (("test_fn", "iter"), None, {}),
    itertools.compress: (("iter", "test"), None, {"data": "iter", "selectors": "test"}),
}


def _adapt(tx: Tracer, vt: VT, how: str) -> Any:
    output = tx.output
    if how == "iter":
        return _pull(iterator_of(tx, vt))
    if how == "test":
        return _pull(iterator_of(tx, vt), output)
    if how == "iters":
        return _pull_iterables(output, iterator_of(tx, vt))
    if how == "args":
        return _pull_argument_tuples(output, iterator_of(tx, vt))
    if how == "value":
        return vt
    if how == "const":
        return vt.const()
    none = vt.is_const() and vt.const() is None
    if how == "add":
        return _traced_add(output) if none else _traced_function(output, vt)
    if how in ("key", "test_fn") and none:
        # groupby compares the items themselves with ==, filterfalse tests their truth: both traced
        return lambda item: _Traced(output, item)
    return None if none else _traced_function(output, vt)  # None is called (a TypeError) only when used


def _lazy(fn: Any) -> Handler:
    positional, rest, keywords = _SPECS[fn]

    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if (len(args) > len(positional) and rest is None) or kwargs.keys() - keywords.keys():
            raises_in_python(f"itertools.{fn.__name__}() got unexpected arguments (TypeError)")
        hows = [*positional, *[rest or ""] * max(0, len(args) - len(positional))]
        real_args = [_adapt(tx, a, how) for a, how in zip(args, hows)]
        if fn in (itertools.groupby, itertools.accumulate) and len(args) == 1:
            # Without a function, groupby compares the items and accumulate adds them: both traced.
            name = "key" if fn is itertools.groupby else "func"
            kwargs = {name: ConstVar(None), **kwargs}
        real_kwargs = {k: _adapt(tx, v, keywords[k]) for k, v in kwargs.items()}
        try:
            real = fn(*real_args, **real_kwargs)
        except Unsupported:
            raise
        except Exception as exc:  # bad arguments: Python raises the same when it makes the call
            raises_in_python(f"itertools.{fn.__name__}() raises {type(exc).__name__}: {exc}", exc)
        return PythonIteratorVar(real, tx.output)

    return handler


def _combinatoric(fn: Any) -> Handler:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        # These take every item of their inputs when called; their output is then fixed.
        pools = [iterator_of(tx, a).unpack(tx) if not a.is_const() or not isinstance(a.const(), int) else a.const()
                 for a in args]  # fmt: skip
        consts = {k: v.const() for k, v in kwargs.items()}
        try:
            combos = list(itertools.islice(fn(*pools, **consts), 10_001))
        except Exception as exc:
            raises_in_python(f"itertools.{fn.__name__}() raises {type(exc).__name__}: {exc}", exc)
        if len(combos) > 10_000:
            unsupported(f"itertools.{fn.__name__}() gives more than 10000 items")
        return IteratorVar([TupleVar(list(combo)) for combo in combos])

    return handler


ITERTOOLS: dict[Any, Handler] = {fn: _lazy(fn) for fn in _SPECS}
ITERTOOLS.update(
    {
        fn: _combinatoric(fn)
        for fn in (
            itertools.product,
            itertools.permutations,
            itertools.combinations,
            itertools.combinations_with_replacement,
        )
    }
)
