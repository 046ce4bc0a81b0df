"""``collections`` made while tracing: OrderedDict, defaultdict and deque, and the dict classmethod ``fromkeys``.

An ``OrderedDict`` is a dict tracker of that class (``move_to_end``,
``popitem(last=)``); a ``defaultdict`` is one that calls its factory
(traced) for a missing key read with ``[]``; a ``deque`` is a list tracker
keeping Python's ``maxlen`` rule (an append on a full deque drops the item
at the other end). Each is rebuilt by calling its class when it escapes the
graph.
"""

from __future__ import annotations

import collections
import operator
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.containers import DictVar, ListVar, SliceVar, as_index
from dynajit.capture._symbolic.variables.iterators import iterator_of

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["COLLECTION_CALLS", "DefaultDictVar", "DequeVar", "dict_of"]

Handler = Any


def dict_of(tx: Tracer, args: list[VT], kwargs: dict[str, VT], into: DictVar) -> DictVar:
    """Fill ``into`` as ``dict(*args, **kwargs)`` would (a mapping or pairs, then keywords)."""
    if len(args) > 1:
        raises_in_python(f"{into.kind.__name__} expected at most 1 argument (TypeError)")
    if args:
        into.update_from(tx, args[0])
    into.items.update(kwargs)
    return into


def _ordered_dict(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return dict_of(tx, args, kwargs, DictVar({}, kind=collections.OrderedDict))


def _fromkeys(kind: type) -> Handler:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs or not 1 <= len(args) <= 2:
            raises_in_python(f"{kind.__name__}.fromkeys takes an iterable and a value (TypeError)")
        value = args[1] if len(args) > 1 else ConstVar(None)
        keys = iterator_of(tx, args[0]).unpack(tx)
        return DictVar({key.const(): value for key in keys}, kind=kind)  # one value object for every key

    return handler


class DefaultDictVar(DictVar):
    """A ``defaultdict`` made while tracing, or one from the frame: ``d[missing]`` stores and returns
    ``factory()``."""

    def __init__(self, factory: VT, items: dict[Any, VT], source: Any = None) -> None:
        super().__init__(items, source, kind=collections.defaultdict)
        self.factory = factory

    def getitem(self, tx: Tracer, key: VT) -> VT:
        k = key.const()
        if k not in self.items:
            if self.factory.is_const() and self.factory.const() is None:
                raises_in_python(f"dict lookup raises KeyError: {k!r}", KeyError(k))
            self.mutated(tx)
            self.items[k] = self.factory.call(tx, [], {})
        return self.items[k]

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "__missing__":
            unsupported("defaultdict.__missing__ called directly is not traced")
        return super().method(tx, name, args, kwargs)

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name == "default_factory":
            return self.factory
        return super().getattr(tx, name)

    def copy(self) -> DictVar:
        return DefaultDictVar(self.factory, self.items)

    def children(self) -> list[VT]:
        return [self.factory, *super().children()]

    def rebuild_class(self, cg: CodeGen) -> int:
        held = getattr(self.factory, "value", None)
        if self.factory.source is None and isinstance(held, type):
            self.factory.reconstruct_object(cg, held)  # a class such as list or int, made with no path
        else:
            self.factory.reconstruct(cg)
        return 1

    def __repr__(self) -> str:
        return f"DefaultDictVar({self.factory!r}, {self.items!r})"


def _defaultdict(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    factory = args[0] if args else ConstVar(None)
    return dict_of(tx, args[1:], kwargs, DefaultDictVar(factory, {}))


_MUTATING_DEQUE_METHODS = frozenset(
    "append extend appendleft extendleft pop popleft rotate insert clear reverse remove".split()
)


class DequeVar(ListVar):
    """A ``collections.deque`` made while tracing, or one from the frame (``maxlen`` None or a constant)."""

    kind = collections.deque  # type: ignore[assignment]  # a list-like class other than list

    def __init__(self, items: list[VT], maxlen: int | None = None, source: Any = None) -> None:
        trimmed = items[len(items) - maxlen :] if maxlen is not None and len(items) > maxlen else items
        super().__init__(trimmed, source)
        self.maxlen = maxlen
        self.state = 0  # counts the changes Python's deque iterator refuses (all but an item replaced, reverse)

    def _trim(self, from_left: bool) -> None:
        if self.maxlen is not None:
            while len(self.items) > self.maxlen:
                self.items.pop(0 if from_left else -1)

    def getitem(self, tx: Tracer, key: VT) -> VT:
        self._no_slice(key)
        return super().getitem(tx, key)

    def setitem(self, tx: Tracer, key: VT, value: VT) -> None:
        self._no_slice(key)
        super().setitem(tx, key, value)

    def delitem(self, tx: Tracer, key: VT) -> None:
        self._no_slice(key)
        super().delitem(tx, key)
        self.state += 1

    @staticmethod
    def _no_slice(key: VT) -> None:
        if isinstance(key, SliceVar) or isinstance(as_index(key), slice):
            raises_in_python("sequence index must be integer, not 'slice' (TypeError)")

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name == "maxlen":
            return ConstVar(self.maxlen)
        return super().getattr(tx, name)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        before = [id(item) for item in self.items]
        result = self._method(tx, name, args, kwargs)
        # (what Python's deque counts as a change: its iterator raises at its next step)
        if (
            name in ("append", "appendleft", "pop", "popleft", "insert", "remove")
            or (name == "clear" and before)
            or (name == "rotate" and len(before) > 1)
            or (name in ("extend", "extendleft") and before != [id(item) for item in self.items])
        ):
            self.state += 1
        return result

    def _method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if kwargs:
            unsupported(f"deque.{name} with keyword arguments")
        items = self.items
        if name in _MUTATING_DEQUE_METHODS:
            self.mutated(tx)  # a deque from the frame gets the trace's contents back after the graph
        if name in ("append", "extend"):
            items.extend([args[0]] if name == "append" else iterator_of(tx, args[0]).unpack(tx))
            self._trim(from_left=True)
        elif name in ("appendleft", "extendleft"):
            for item in [args[0]] if name == "appendleft" else iterator_of(tx, args[0]).unpack(tx):
                items.insert(0, item)
            self._trim(from_left=False)
        elif name in ("pop", "popleft"):
            if args:
                raises_in_python(f"deque.{name}() takes no arguments (TypeError)")
            if not items:
                message = "pop from an empty deque"
                raises_in_python(f"{message} (IndexError)", IndexError(message))
            return items.pop(-1 if name == "pop" else 0)
        elif name == "rotate":
            steps = args[0].const() if args else 1
            if items:
                steps %= len(items)
                items[:] = items[len(items) - steps :] + items[: len(items) - steps]
        elif name == "insert":
            if self.maxlen is not None and len(items) >= self.maxlen:
                message = "deque already at its maximum size"
                raises_in_python(f"{message} (IndexError)", IndexError(message))
            return super().method(tx, name, args, kwargs)
        elif name == "copy":
            return DequeVar(items, self.maxlen)
        elif name in ("clear", "reverse", "remove", "count", "index"):
            return super().method(tx, name, args, kwargs)
        else:
            unsupported(f"deque.{name} is not traced")
        return ConstVar(None)

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return

        def build() -> None:
            def load_arguments() -> int:
                ListVar(self.items).reconstruct(cg)
                cg.load_const(self.maxlen)
                return 2

            cg.call_helper(collections.deque, load_arguments)

        cg.build_cached(self, build)

    def __repr__(self) -> str:
        return f"DequeVar({self.items!r}, maxlen={self.maxlen})"


def _deque(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if len(args) + len(kwargs) > 2 or kwargs.keys() - {"iterable", "maxlen"}:
        raises_in_python("deque() takes an iterable and maxlen (TypeError)")
    iterable = args[0] if args else kwargs.get("iterable")
    maxlen_vt = args[1] if len(args) > 1 else kwargs.get("maxlen", ConstVar(None))
    maxlen = maxlen_vt.const()
    if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
        raises_in_python("deque() maxlen must be a non-negative integer or None (ValueError)")
    items = iterator_of(tx, iterable).unpack(tx) if iterable is not None else []
    return DequeVar(items, maxlen)


COLLECTION_CALLS: dict[Any, Handler] = {
    collections.OrderedDict: _ordered_dict,
    collections.defaultdict: _defaultdict,
    collections.deque: _deque,
    dict.fromkeys: _fromkeys(dict),
    collections.OrderedDict.fromkeys: _fromkeys(collections.OrderedDict),
}


def _count_elements(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``collections._count_elements(mapping, iterable)`` (what ``Counter.update`` calls): traced gets and sets."""
    from dynajit.capture._symbolic.opcodes_ops import apply_operator

    if kwargs or len(args) != 2:
        raises_in_python("_count_elements() takes a mapping and an iterable (TypeError)")
    mapping, iterable = args
    for element in iterator_of(tx, iterable).unpack(tx):
        current = mapping.call_method(tx, "get", [element, ConstVar(0)], {})
        mapping.call_method(tx, "__setitem__", [element, apply_operator(tx, operator.add, [current, ConstVar(1)])], {})
    return ConstVar(None)


COLLECTION_CALLS[collections._count_elements] = _count_elements  # type: ignore[attr-defined]
