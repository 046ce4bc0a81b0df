"""Builtins over iterables while tracing: ``iter``, ``next``, ``zip``, ``enumerate``, ``map``, ``filter``,
``reversed``, ``functools.reduce``, ``min``/``max``, ``operator.itemgetter``/``attrgetter``, ``itertools`` and the ``collections``
classes.

``zip``, ``enumerate``, ``map`` and ``filter`` are lazy iterators
(``variables/iterators.py``) and ``itertools`` objects run Python's own
itertools over trackers (``itertools_traced.py``), so items are taken from
their inputs when the consumer asks, as in Python. ``min``/``max`` compare
items (or their ``key=`` results) with traced ``<``/``>``: constants fold,
symbolic sizes are decided and guarded, tensors compared by value are a
graph break.
"""

from __future__ import annotations

import functools
import heapq
import operator
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.builtins_table import BUILTINS, builtin, sort_items
from dynajit.capture._symbolic.itertools_traced import ITERTOOLS
from dynajit.capture._symbolic.variables import (
    VT,
    ConstVar,
    IteratorVar,
    ListVar,
    TensorVar,
    TupleVar,
    raises_in_python,
    unsupported,
)
from dynajit.capture._symbolic.variables.collections_ import COLLECTION_CALLS
from dynajit.capture._symbolic.variables.item_iterators import list_iterator_at
from dynajit.capture._symbolic.variables.iterators import (
    CallIterVar,
    EnumerateVar,
    FilterVar,
    MapVar,
    ZipVar,
    iterator_of,
    raise_as_python,
    reversed_of,
)

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__: list[str] = []


@builtin(list_iterator_at)
def _list_iterator_at(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """A resume function's prologue rebuilding a loop's iterator over a list at the position it had reached."""
    over, position, exhausted = args
    if kwargs or not isinstance(over, ListVar):
        unsupported("a list iterator rebuilt over something other than a list")
    iterator = IteratorVar([], over=over)
    iterator.position, iterator.exhausted = position.const(), exhausted.const()
    return iterator


@builtin(iter)
def _iter(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) not in (1, 2):
        raises_in_python("iter() takes one or two positional arguments (TypeError)")
    if len(args) == 2:
        if not BUILTINS[callable](tx, args[:1], {}).const():
            raises_in_python("iter(v, w): v must be callable (TypeError)", TypeError("iter(v, w): v must be callable"))
        return CallIterVar(tx.output, args[0], args[1])
    return iterator_of(tx, args[0])


@builtin(next)
def _next(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or not 1 <= len(args) <= 2:
        raises_in_python("next() takes one or two positional arguments (TypeError)")
    iterator = args[0]
    if not isinstance(iterator, IteratorVar):
        try:
            kind = iterator.python_type()
        except Exception:
            unsupported(f"next() on {iterator}")
        if kind in (list, tuple, dict, set, str, range):
            message = f"'{kind.__name__}' object is not an iterator"
            raises_in_python(f"{message} (TypeError)", TypeError(message))
        unsupported(f"next() on {iterator}")
    item = iterator.next()
    if item is None:
        if len(args) > 1:
            return args[1]
        raises_in_python("next() on an exhausted iterator raises StopIteration", StopIteration())
    return item


@builtin(functools.reduce)
def _reduce(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``functools.reduce(function, iterable[, initial])``, taking items one at a time as Python's does."""
    if kwargs or not 2 <= len(args) <= 3:
        raises_in_python("reduce() takes a function, an iterable and an optional initial value (TypeError)")
    function, iterator = args[0], iterator_of(tx, args[1])
    total = args[2] if len(args) == 3 else iterator.next()
    if total is None:
        message = "reduce() of empty iterable with no initial value"
        raises_in_python(f"{message} (TypeError)", TypeError(message))
    while (item := iterator.next()) is not None:
        total = function.call(tx, [total, item], {})
    return total


@builtin(enumerate)
def _enumerate(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs.keys() - {"start", "iterable"} or len(args) + len(kwargs) not in (1, 2):
        raises_in_python("enumerate() takes an iterable and a start (TypeError)")
    iterable = args[0] if args else kwargs["iterable"]
    start = (args[1] if len(args) > 1 else kwargs.get("start", ConstVar(0))).const()
    if not isinstance(start, int):
        raises_in_python("enumerate() start must be an integer (TypeError)")
    return EnumerateVar(tx.output, iterator_of(tx, iterable), start)


@builtin(zip)
def _zip(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs.keys() - {"strict"}:
        raises_in_python("zip() takes only the keyword strict (TypeError)")
    strict = bool(kwargs.get("strict", ConstVar(False)).const())
    return ZipVar(tx.output, [iterator_of(tx, a) for a in args], strict)


@builtin(map)
def _map(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) < 2:
        raises_in_python("map() takes a function and at least one iterable (TypeError)")
    return MapVar(tx.output, [iterator_of(tx, a) for a in args[1:]], args[0])


@builtin(filter)
def _filter(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != 2:
        raises_in_python("filter() takes a function and one iterable (TypeError)")
    return FilterVar(tx.output, [iterator_of(tx, args[1])], args[0])


@builtin(reversed)
def _reversed(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != 1:
        raises_in_python("reversed() takes exactly one argument (TypeError)")
    return reversed_of(tx, args[0])


def _min_max(pick: Any) -> Any:
    better = operator.lt if pick is min else operator.gt

    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.opcodes_ops import apply_operator

        if kwargs.keys() - {"key", "default"} or not args or (len(args) > 1 and "default" in kwargs):
            raises_in_python(f"{pick.__name__}() got unexpected arguments (TypeError)")
        items = iterator_of(tx, args[0]).unpack(tx) if len(args) == 1 else list(args)
        key = kwargs.get("key")
        if key is not None and key.is_const() and key.const() is None:
            key = None
        if not items:
            if "default" in kwargs:
                return kwargs["default"]
            raise_as_python(lambda: pick([]))
        if key is None and all(item.is_const() for item in items) and not any(isinstance(i, TensorVar) for i in items):
            try:
                return tx.wrap_const(pick(item.const() for item in items))
            except TypeError as exc:
                raises_in_python(f"{pick.__name__}() raises TypeError: {exc}", exc)
        # The first best item wins ties, as in Python: a later item replaces it only when strictly better.
        best, best_key = items[0], items[0] if key is None else key.call(tx, [items[0]], {})
        for item in items[1:]:
            item_key = item if key is None else key.call(tx, [item], {})
            if isinstance(item_key, TensorVar) or isinstance(best_key, TensorVar):
                unsupported(f"{pick.__name__}() over tensors compares their values, which needs their data")
            if apply_operator(tx, better, [item_key, best_key]).truth(tx):
                best, best_key = item, item_key
        return best

    return handler


BUILTINS[min] = _min_max(min)
BUILTINS[max] = _min_max(max)
BUILTINS.update(ITERTOOLS)
BUILTINS.update(COLLECTION_CALLS)


class _GetterVar(VT):
    """``operator.itemgetter(*keys)`` / ``attrgetter(*names)`` of constants: calls read traced."""

    def __init__(self, kind: Any, keys: list[Any]) -> None:
        self.kind, self.keys = kind, keys

    def python_type(self) -> type:
        return type(self.kind(*self.keys))

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.opcodes_ops import apply_operator

        if kwargs or len(args) != 1:
            raises_in_python(f"{self.kind.__name__} takes exactly one argument (TypeError)")
        picked = []
        for key in self.keys:
            if self.kind is operator.itemgetter:
                picked.append(apply_operator(tx, operator.getitem, [args[0], tx.wrap_const(key)]))
            else:
                value = args[0]
                for name in key.split("."):  # attrgetter("a.b") follows the dotted path
                    value = value.getattr(tx, name)
                picked.append(value)
        return picked[0] if len(picked) == 1 else TupleVar(picked)

    def reconstruct(self, cg: CodeGen) -> None:
        def load_keys() -> int:
            for key in self.keys:
                cg.load_const_any(key)
            return len(self.keys)

        cg.call_helper(self.kind, load_keys)

    def __repr__(self) -> str:
        return f"_GetterVar({self.kind.__name__}, {self.keys!r})"


def _getter(kind: Any) -> Any:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs or not args or not all(a.is_const() for a in args):
            unsupported(f"operator.{kind.__name__} of other than constant keys")
        keys = [a.const() for a in args]
        if kind is operator.attrgetter and not all(isinstance(k, str) for k in keys):
            raises_in_python(
                "attribute name must be a string (TypeError)", TypeError("attribute name must be a string")
            )
        return _GetterVar(kind, keys)

    return handler


BUILTINS[operator.itemgetter] = _getter(operator.itemgetter)
BUILTINS[operator.attrgetter] = _getter(operator.attrgetter)


def _select(reverse: bool) -> Any:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        """``heapq.nlargest``/``nsmallest(n, iterable, key=None)``: documented as equal to
        ``sorted(iterable, key=key, reverse=...)[:n]``, which is how they are traced (one key call per item)."""
        if len(args) != 2 or kwargs.keys() - {"key"} or not args[0].is_const() or type(args[0].const()) is not int:
            unsupported("heapq.nlargest/nsmallest with other than a known n, an iterable and key=")
        key = kwargs.get("key")
        items = iterator_of(tx, args[1]).unpack(tx)
        ordered = sort_items(tx, items, None if key is not None and key.is_const() and key.const() is None else key,
                             ConstVar(reverse))  # fmt: skip
        return ListVar(ordered[: max(args[0].const(), 0)])

    return handler


BUILTINS[heapq.nlargest] = _select(reverse=True)
BUILTINS[heapq.nsmallest] = _select(reverse=False)
