"""Containers: tuples, lists, dicts, sets and slices of tracked items.

Mutable containers are mutated in place, so every holder of the same tracker
sees the change (the tracker is the object's identity while tracing). A
container that came from the frame (it has a source) and is mutated is recorded
as a side effect and written back after the graph runs.
"""

from __future__ import annotations

import collections
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.variables.base import VT, AttributeMissing, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "DictVar",
    "DictViewVar",
    "ListVar",
    "NamedTupleVar",
    "SetVar",
    "SizeVar",
    "SliceVar",
    "StructSeqVar",
    "TupleVar",
    "as_index",
    "is_named_tuple_class",
]


def as_index(vt: VT) -> Any:
    """A constant index or slice for subscripting a tracked container."""
    if isinstance(vt, SliceVar):
        return slice(*(part.const() for part in vt.parts))
    return vt.const()


class _Sequence(VT):
    kind: type = tuple

    def __init__(self, items: list[VT], source: Any = None) -> None:
        self.items = list(items)
        self.source = source

    def python_type(self) -> type:
        return self.kind

    def is_const(self) -> bool:
        return all(item.is_const() for item in self.items)

    def const(self) -> Any:
        return self.kind(item.const() for item in self.items)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def unpack(self, tx: Tracer) -> list[VT]:
        return list(self.items)

    def children(self) -> list[VT]:
        return list(self.items)

    def _as_python(self, values: list[Any]) -> Any:
        """``values`` as the builtin sequence this one is, so an error carries its message ("tuple index out of
        range", "tuple.index(x): x not in tuple")."""
        return list(values) if issubclass(self.kind, list) else tuple(values)

    def getitem(self, tx: Tracer, key: VT) -> VT:
        index = as_index(key)
        try:
            picked = self._as_python(self.items)[index]
        except (IndexError, TypeError) as exc:
            raises_in_python(f"indexing a {self.kind.__name__} raises {type(exc).__name__}: {exc}", exc)
        return type(self)(picked) if isinstance(index, slice) else picked

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if name == "index" and not kwargs:
            return ConstVar(self.position(args, f"{self.kind.__name__}.index"))
        if name == "count" and not kwargs:
            return ConstVar([item.const() for item in self.items].count(args[0].const()))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        unsupported(f"{self.kind.__name__}.{name} is not traced")

    def position(self, args: list[VT], what: str) -> int:
        """Where the constant ``args[0]`` first is among the items (``index``'s arguments), or the ValueError
        Python raises when it is not there (``try: filters.remove(item) except ValueError`` is traced)."""
        consts = self._as_python([item.const() for item in self.items])
        try:
            return consts.index(*[a.const() for a in args])
        except ValueError as exc:
            raises_in_python(f"{what} raises ValueError: {exc}", exc)

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.functions import MethodOf

        if not hasattr(self.kind, name):
            unsupported(f"{self.kind.__name__} has no attribute {name!r}")
        return MethodOf(self, name)


class TupleVar(_Sequence):
    kind = tuple

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return
        for item in self.items:
            item.reconstruct(cg)
        cg.build("BUILD_TUPLE", len(self.items))

    def __repr__(self) -> str:
        return f"TupleVar({self.items!r})"


class SizeVar(TupleVar):
    """A ``torch.Size``: a tuple of ints (some of them symbolic) whose type is ``torch.Size``.

    Graph operations take it as a plain tuple (``kind``); Python sees a ``torch.Size``.
    """

    def python_type(self) -> type:
        return torch.Size

    def const(self) -> Any:
        return torch.Size(item.const() for item in self.items)

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.functions import MethodOf

        if not hasattr(torch.Size, name):
            raise AttributeMissing(f"'torch.Size' object has no attribute {name!r} (AttributeError)")
        return MethodOf(self, name)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if name == "numel" and not args and not kwargs:
            from dynajit.capture._symbolic.opcodes_ops import apply_operator

            total: VT = ConstVar(1)
            for item in self.items:
                total = apply_operator(tx, operator.mul, [total, item])
            return total
        return super().method(tx, name, args, kwargs)

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return

        def load_items() -> int:
            TupleVar(self.items).reconstruct(cg)
            return 1

        cg.call_helper(torch.Size, load_items)

    def __repr__(self) -> str:
        return f"SizeVar({self.items!r})"


class StructSeqVar(TupleVar):
    """A named result of a torch operation (``torch.return_types.topk``: ``.values``, ``.indices``)."""

    def __init__(self, items: list[VT], kind: type = tuple, source: Any = None) -> None:
        super().__init__(items, source)
        self.kind = kind  # type: ignore[assignment]  # a slice or a sum of it is a plain tuple, as in Python

    def getattr(self, tx: Tracer, name: str) -> VT:
        fields = getattr(self.kind, "__match_args__", ())
        if name in fields:
            return self.items[fields.index(name)]
        return super().getattr(tx, name)

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return

        def load_items() -> int:
            leading = self._leading_arguments(cg)
            TupleVar(self.items).reconstruct(cg)
            return leading + 1

        cg.call_helper(self._rebuilder(), load_items)

    def _rebuilder(self) -> Any:
        """What the transformed code calls with the items (after any leading arguments) to rebuild the value."""
        return self.kind

    def _leading_arguments(self, cg: CodeGen) -> int:
        return 0

    def __repr__(self) -> str:
        return f"StructSeqVar({self.kind.__name__}, {self.items!r})"


def is_named_tuple_class(cls: Any) -> bool:
    """A class made by ``collections.namedtuple`` or ``typing.NamedTuple`` (instances without a ``__dict__``)."""
    return (
        isinstance(cls, type)
        and issubclass(cls, tuple)
        and isinstance(getattr(cls, "_fields", None), tuple)
        and hasattr(cls, "_make")
        and cls.__dictoffset__ == 0
    )


class NamedTupleVar(StructSeqVar):
    """An instance of a named tuple class: fields by name; the class's Python methods and properties inlined."""

    def const(self) -> Any:
        return tuple.__new__(self.kind, [item.const() for item in self.items])

    def getattr(self, tx: Tracer, name: str) -> VT:
        import inspect
        import types

        from dynajit.capture._symbolic.variables.functions import BoundMethodVar

        fields = getattr(self.kind, "_fields", ())
        if name in fields:
            return self.items[fields.index(name)]
        static = inspect.getattr_static(self.kind, name, None)
        if isinstance(static, types.FunctionType):
            return BoundMethodVar(tx.wrap(static, None), self)
        if isinstance(static, property) and isinstance(static.fget, types.FunctionType):
            return tx.wrap(static.fget, None).call(tx, [self], {})
        if isinstance(static, (tuple, str, int, float, bool)):  # _fields and other constants
            return tx.wrap_const(static)
        return super().getattr(tx, name)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if name == "_make" and len(args) == 1 and not kwargs:  # classmethod: tuple.__new__(cls, iterable)
            from dynajit.capture._symbolic.variables.iterators import iterator_of

            items = iterator_of(tx, args[0]).unpack(tx)
            fields: tuple[str, ...] = getattr(self.kind, "_fields", ())
            if len(items) != len(fields):
                message = f"Expected {len(fields)} arguments, got {len(items)}"
                raises_in_python(f"{message} (TypeError)", TypeError(message))
            return NamedTupleVar(items, self.kind)
        return super().method(tx, name, args, kwargs)

    def _rebuilder(self) -> Any:
        # tuple.__new__(cls, items) gives exactly these items, whatever the class's own __new__ would do with them.
        return tuple.__new__

    def _leading_arguments(self, cg: CodeGen) -> int:
        cg.load_const_any(self.kind)
        return 1


class ListVar(_Sequence):
    kind = list

    def mutated(self, tx: Tracer) -> None:
        if self.source is not None:
            tx.output.side_effects.record_mutation(self)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        table: dict[str, Callable[..., Any]] = {
            "append": lambda x: self.items.append(x),
            "extend": lambda x: self.items.extend(x.unpack(tx)),
            "insert": lambda i, x: self.items.insert(i.const(), x),
            "pop": lambda i=None: self.items.pop(i.const() if i is not None else -1),
            "clear": lambda: self.items.clear(),
            "reverse": lambda: self.items.reverse(),
            "remove": lambda x: self.items.pop(self.position([x], "list.remove")),
            "copy": lambda: ListVar(self.items),
        }
        if name in table and not kwargs:
            if name != "copy":
                if name == "pop" and not self.items:
                    unsupported("pop from an empty list raises IndexError")
                if name == "remove" and len(args) == 1:
                    self.position(args, "list.remove")  # (a failed remove changes nothing)
                self.mutated(tx)
            try:
                result = table[name](*args)
            except (IndexError, ValueError, TypeError) as exc:  # (pop out of range changes nothing)
                raises_in_python(f"list.{name} raises {type(exc).__name__}: {exc}", exc)
            return result if isinstance(result, VT) else ConstVar(None)
        if name == "sort":
            from dynajit.capture._symbolic.builtins_table import sort_items

            if args or kwargs.keys() - {"key", "reverse"}:
                raises_in_python("list.sort() takes only the keywords key and reverse (TypeError)")
            ordered = sort_items(tx, self.items, kwargs.get("key"), kwargs.get("reverse"))
            self.mutated(tx)
            self.items[:] = ordered
            return ConstVar(None)
        return super().method(tx, name, args, kwargs)

    def setitem(self, tx: Tracer, key: VT, value: VT) -> None:
        index = as_index(key)
        try:
            self.items[index] = value.unpack(tx) if isinstance(index, slice) else value
        except (IndexError, TypeError, ValueError) as exc:
            raises_in_python(f"list assignment raises {type(exc).__name__}: {exc}", exc)
        self.mutated(tx)

    def delitem(self, tx: Tracer, key: VT) -> None:
        try:
            del self.items[as_index(key)]
        except (IndexError, TypeError) as exc:
            raises_in_python(f"list deletion raises {type(exc).__name__}: {exc}", exc)
        self.mutated(tx)

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return

        def build() -> None:
            for item in self.items:
                item.reconstruct(cg)
            cg.build("BUILD_LIST", len(self.items))

        cg.build_cached(self, build)

    def __repr__(self) -> str:
        return f"ListVar({self.items!r})"


class DictVar(VT):
    """A dict whose keys are constants."""

    def __init__(self, items: dict[Any, VT], source: Any = None, kind: type = dict) -> None:
        self.items = dict(items)
        self.source = source
        self.kind = kind

    def python_type(self) -> type:
        return self.kind

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def unpack(self, tx: Tracer) -> list[VT]:
        return [ConstVar(k) for k in self.items]

    def children(self) -> list[VT]:
        return list(self.items.values())

    def getitem(self, tx: Tracer, key: VT) -> VT:
        k = key.const()
        if k not in self.items:
            raises_in_python(f"dict lookup raises KeyError: {k!r}", KeyError(k))
        return self.items[k]

    def setitem(self, tx: Tracer, key: VT, value: VT) -> None:
        self.items[key.const()] = value
        self.mutated(tx)

    def delitem(self, tx: Tracer, key: VT) -> None:
        k = key.const()
        if k not in self.items:
            raises_in_python(f"dict deletion raises KeyError: {k!r}", KeyError(k))
        del self.items[k]
        self.mutated(tx)

    def mutated(self, tx: Tracer) -> None:
        if self.source is not None:
            tx.output.side_effects.record_mutation(self)

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.functions import MethodOf

        if not hasattr(self.kind, name):
            unsupported(f"{self.kind.__name__} has no attribute {name!r}")
        return MethodOf(self, name)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if name in DictViewVar.KINDS:
            if args or kwargs:
                raises_in_python(f"dict.{name}() takes no arguments (TypeError)")
            return DictViewVar(self, self.items, name, self.kind)
        if name in ("get", "__getitem__"):
            key = args[0].const()
            if key in self.items:
                return self.items[key]
            if name == "__getitem__":
                raises_in_python(f"dict lookup raises KeyError: {key!r}", KeyError(key))
            return args[1] if len(args) > 1 else ConstVar(None)
        if name == "__contains__":
            return ConstVar(args[0].const() in self.items)
        if name == "copy" and not args and not kwargs:
            return self.copy()
        if name in ("__or__", "__ror__") and len(args) == 1 and not kwargs:
            return self.union(tx, args[0], name == "__ror__")
        if name in ("update", "pop", "setdefault", "clear", "__setitem__", "popitem", "move_to_end", "__ior__"):
            return self._mutating(tx, name, args, kwargs)
        unsupported(f"{self.kind.__name__}.{name} is not traced")

    def copy(self) -> DictVar:
        """A new dict of the same class with the same items (``d.copy()``)."""
        return DictVar(self.items, kind=self.kind)

    def union(self, tx: Tracer, other: VT, reflected: bool = False) -> VT:
        """``self | other`` (``other | self`` when ``reflected``): a new dict of the left operand's class."""
        if not isinstance(other, DictVar):
            unsupported(f"{self.kind.__name__} | {other} (only dicts are traced)")
        left, right = (other, self) if reflected else (self, other)
        result = left.copy()
        result.items.update(right.items)
        return result

    def update_from(self, tx: Tracer, source: VT) -> None:
        """``self.update(source)``: a dict's items, or an iterable of key-value pairs."""
        if isinstance(source, DictVar):
            self.items.update(source.items)
            return
        from dynajit.capture._frame import Unsupported
        from dynajit.capture._symbolic.variables.iterators import iterator_of

        try:
            mapping = hasattr(source.python_type(), "keys")
        except Unsupported:
            mapping = False
        if mapping:  # as Python does for anything with keys(): its keys, each looked up with []
            for key in iterator_of(tx, source.call_method(tx, "keys", [], {})).unpack(tx):
                self.items[key.const()] = source.call_method(tx, "__getitem__", [key], {})
            return
        for index, pair in enumerate(iterator_of(tx, source).unpack(tx)):
            items = pair.unpack(tx)
            if len(items) != 2:
                message = f"dictionary update sequence element #{index} has length {len(items)}; 2 is required"
                raises_in_python(f"{message} (ValueError)", ValueError(message))
            self.items[items[0].const()] = items[1]

    def _mutating(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if name == "popitem":
            return self._popitem(tx, args, kwargs)
        if name == "move_to_end":
            return self._move_to_end(tx, args, kwargs)
        self.mutated(tx)
        if name in ("update", "__ior__"):
            if len(args) > 1 or (name == "__ior__" and (kwargs or not args)):
                raises_in_python(f"dict.{name} takes at most one positional argument (TypeError)")
            if args:
                self.update_from(tx, args[0])
            self.items.update(kwargs)
            return self if name == "__ior__" else ConstVar(None)
        if name == "clear":
            self.items.clear()
            return ConstVar(None)
        if name == "__setitem__":
            self.items[args[0].const()] = args[1]
            return ConstVar(None)
        key = args[0].const()
        if name == "setdefault":
            return self.items.setdefault(key, args[1] if len(args) > 1 else ConstVar(None))
        if key in self.items:
            return self.items.pop(key)
        if len(args) > 1:
            return args[1]
        raises_in_python(f"dict.pop raises KeyError: {key!r}", KeyError(key))

    def _popitem(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        ordered = self.kind is not dict and issubclass(self.kind, collections.OrderedDict)
        if (len(args) + len(kwargs) > (1 if ordered else 0)) or kwargs.keys() - {"last"}:
            raises_in_python(f"{self.kind.__name__}.popitem() got unexpected arguments (TypeError)")
        last = bool((args[0] if args else kwargs.get("last", ConstVar(True))).const())
        if not self.items:
            message = "dictionary is empty" if ordered else "popitem(): dictionary is empty"
            raises_in_python(f"{message} (KeyError)", KeyError(message))
        self.mutated(tx)
        key = next(reversed(self.items)) if last else next(iter(self.items))
        return TupleVar([ConstVar(key), self.items.pop(key)])

    def _move_to_end(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if not issubclass(self.kind, collections.OrderedDict):
            unsupported(f"{self.kind.__name__}.move_to_end is not traced")
        if not 1 <= len(args) + len(kwargs) <= 2 or kwargs.keys() - {"key", "last"}:
            raises_in_python("move_to_end() takes a key and last (TypeError)")
        key = (args[0] if args else kwargs["key"]).const()
        last = bool((args[1] if len(args) > 1 else kwargs.get("last", ConstVar(True))).const())
        if key not in self.items:
            raises_in_python(f"move_to_end raises KeyError: {key!r}", KeyError(key))
        self.mutated(tx)
        value = self.items.pop(key)
        if last:
            self.items[key] = value
        else:
            rest = dict(self.items)  # reordered in place: views hold this very mapping
            self.items.clear()
            self.items[key] = value
            self.items.update(rest)
        return ConstVar(None)

    def rebuild_class(self, cg: CodeGen) -> int:
        """Load what a new dict's items are passed to (besides the dict itself); how many values were loaded."""
        return 0

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return

        def build_map() -> None:
            for key, value in self.items.items():
                cg.load_const_any(key)
                value.reconstruct(cg)
            cg.build("BUILD_MAP", len(self.items))

        def build() -> None:
            if self.kind is dict:
                build_map()
                return

            def load_arguments() -> int:
                leading = self.rebuild_class(cg)
                build_map()
                return leading + 1

            cg.call_helper(self.kind, load_arguments)  # an OrderedDict, defaultdict, ... of the items

        cg.build_cached(self, build)

    def __repr__(self) -> str:
        return f"DictVar({self.items!r})"


class DictViewVar(VT):
    """``d.keys()`` / ``d.values()`` / ``d.items()``: a live view of a dict tracker's items.

    It holds the very mapping the dict tracker mutates, so a view taken before ``d[k] = v`` sees the
    new key, as in Python. ``owner`` is the tracker the view is rebuilt from when it escapes.
    """

    KINDS = ("keys", "values", "items")

    def __init__(self, owner: VT, mapping: dict[Any, VT], kind: str, base: type = dict) -> None:
        self.owner = owner
        self.mapping = mapping
        self.kind = kind
        self.base = base  # dict or OrderedDict: whose method made the view (and remakes it)

    def python_type(self) -> type:
        return type(getattr(self.base(), self.kind)())

    def truth(self, tx: Tracer) -> bool:
        return bool(self.mapping)

    def length(self) -> int:
        return len(self.mapping)

    def unpack(self, tx: Tracer) -> list[VT]:
        if self.kind == "keys":
            return [ConstVar(k) for k in self.mapping]
        if self.kind == "values":
            return list(self.mapping.values())
        return [TupleVar([ConstVar(k), v]) for k, v in self.mapping.items()]

    def children(self) -> list[VT]:
        return [self.owner]

    def as_set(self, tx: Tracer) -> set[Any]:
        """The view's items as a set of constants (the set operations of keys and items views)."""
        if self.kind == "values":
            unsupported("set operations on dict.values() (a values view is not set-like)")
        if self.kind == "keys":
            return set(self.mapping)
        if not all(v.is_const() for v in self.mapping.values()):
            unsupported("set operations on dict.items() whose values are not constants (they are hashed)")
        return {(k, v.const()) for k, v in self.mapping.items()}

    def contains(self, tx: Tracer, item: VT) -> bool:
        """``item in view``."""
        from dynajit.capture._symbolic.opcodes_ops import apply_operator, identical

        if self.kind == "keys":
            return item.const() in self.mapping
        if self.kind == "items":
            if item.python_type() is not tuple:
                return False
            pair = item.unpack(tx)
            if len(pair) != 2 or pair[0].const() not in self.mapping:
                return False
            found, wanted = self.mapping[pair[0].const()], pair[1]
            return identical(found, wanted, tx) or apply_operator(tx, operator.eq, [found, wanted]).truth(tx)
        return any(
            identical(item, other, tx) or apply_operator(tx, operator.eq, [other, item]).truth(tx)
            for other in self.mapping.values()
        )

    def operator(self, tx: Tracer, op: Any, other: VT, reflected: bool) -> VT:
        """``self <op> other`` (or ``other <op> self`` when ``reflected``) for a set operation or comparison."""
        if op in (operator.eq, operator.ne):
            if self.kind == "values" or not _is_set_like(other):
                same = other is self  # a values view equals only itself; a set-like view never equals a non-set
            else:
                same = self.as_set(tx) == _set_of(tx, other)
            return ConstVar(same == (op is operator.eq))
        if op not in _SET_OPERATORS:
            unsupported(f"operator {op.__name__} on a dict view")
        mine = self.as_set(tx)
        if op in _ORDERINGS:
            if not _is_set_like(other):
                raises_in_python(f"'{op.__name__}' between a dict view and {other} (TypeError)")
            theirs = _set_of(tx, other)
        else:
            # &, |, ^ and - accept any iterable on the other side
            theirs = _set_of(tx, other) if _is_set_like(other) else {v.const() for v in other.unpack(tx)}
        left, right = (theirs, mine) if reflected else (mine, theirs)
        result = _SET_OPERATORS[op](left, right)
        return ConstVar(result) if isinstance(result, bool) else SetVar([ConstVar(v) for v in result])

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.functions import MethodOf

        if not hasattr(self.python_type(), name):
            raise AttributeMissing(f"{self.python_type().__name__!r} object has no attribute {name!r} (AttributeError)")
        return MethodOf(self, name)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if name == "isdisjoint" and len(args) == 1 and not kwargs:
            return ConstVar(not any(self.contains(tx, item) for item in args[0].unpack(tx)))
        if name == "__len__" and not args and not kwargs:
            return ConstVar(self.length())
        if name == "__contains__" and len(args) == 1 and not kwargs:
            return ConstVar(self.contains(tx, args[0]))
        unsupported(f"{self.python_type().__name__}.{name} is not traced")

    def reconstruct(self, cg: CodeGen) -> None:
        def load_owner() -> int:
            self.owner.reconstruct(cg)
            return 1

        # A view of the rebuilt (or the frame's own) dict, so it stays live after the graph too.
        cg.call_helper(getattr(self.base, self.kind), load_owner)

    def __repr__(self) -> str:
        return f"DictViewVar({self.kind} of {self.owner!r})"


_ORDERINGS = {operator.lt, operator.le, operator.gt, operator.ge}
_SET_OPERATORS: dict[Any, Callable[[set[Any], set[Any]], Any]] = {
    operator.and_: operator.and_,
    operator.or_: operator.or_,
    operator.xor: operator.xor,
    operator.sub: operator.sub,
    operator.lt: operator.lt,
    operator.le: operator.le,
    operator.gt: operator.gt,
    operator.ge: operator.ge,
}


def _is_set_like(vt: VT) -> bool:
    """A set, frozenset or keys/items view (what a dict view compares with as a set)."""
    if isinstance(vt, DictViewVar):
        return vt.kind != "values"
    if isinstance(vt, SetVar):
        return True
    return vt.is_const() and isinstance(vt.const(), (set, frozenset))


def _set_of(tx: Tracer, vt: VT) -> set[Any]:
    if isinstance(vt, DictViewVar):
        return vt.as_set(tx)
    return set(vt.const())


class SetVar(VT):
    """A set of constants."""

    def __init__(self, items: list[VT], source: Any = None) -> None:
        self.values = {item.const() for item in items}
        self.source = source

    def python_type(self) -> type:
        return set

    def truth(self, tx: Tracer) -> bool:
        return bool(self.values)

    def unpack(self, tx: Tracer) -> list[VT]:
        return [ConstVar(v) for v in self.values]

    def is_const(self) -> bool:
        return True

    def const(self) -> Any:
        return set(self.values)

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.functions import MethodOf

        return MethodOf(self, name)

    def method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if self.source is not None and name in ("add", "discard", "remove", "update", "clear", "pop"):
            unsupported(f"mutating a set from the frame (set.{name})")
        try:
            result = getattr(self.values, name)(*[a.const() for a in args])
        except Exception as exc:
            raises_in_python(f"set.{name} raises {type(exc).__name__}: {exc}")
        if isinstance(result, set):
            return SetVar([ConstVar(v) for v in result])
        return ConstVar(result)

    def operate_in_place(self, op: Callable[[Any, Any], Any], other: VT) -> SetVar:
        """``self |= other`` (``&=``, ``-=``, ``^=``): set's own in-place operator, on this set."""
        if self.source is not None:
            unsupported(f"mutating a set from the frame ({op.__name__})")
        try:
            op(self.values, other.const())
        except Exception as exc:
            raises_in_python(f"set {op.__name__} raises {type(exc).__name__}: {exc}", exc)
        return self

    def reconstruct(self, cg: CodeGen) -> None:
        def build() -> None:
            for value in self.values:
                cg.load_const_any(value)
            cg.build("BUILD_SET", len(self.values))

        cg.build_cached(self, build)


class SliceVar(VT):
    """``slice(start, stop, step)`` of tracked values (constants, or tensors for advanced indexing)."""

    def __init__(self, parts: list[VT]) -> None:
        self.parts = parts

    def python_type(self) -> type:
        return slice

    def is_const(self) -> bool:
        return all(p.is_const() for p in self.parts)

    def const(self) -> Any:
        return slice(*(p.const() for p in self.parts))

    def children(self) -> list[VT]:
        return list(self.parts)

    def reconstruct(self, cg: CodeGen) -> None:
        for part in self.parts:
            part.reconstruct(cg)
        cg.build("BUILD_SLICE", len(self.parts))
