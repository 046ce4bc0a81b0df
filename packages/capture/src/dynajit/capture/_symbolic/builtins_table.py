"""Builtins while tracing: one handler per builtin (len, isinstance, range, zip, min, ...) in a table."""

from __future__ import annotations

import functools
import math
import operator
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._frame import Unsupported
from dynajit.capture._symbolic.paths import class_path
from dynajit.capture._symbolic.variables import (
    VT,
    ConstVar,
    DictVar,
    ExceptionVar,
    IteratorVar,
    ListVar,
    NNModuleVar,
    SetVar,
    SizeVar,
    SliceVar,
    TensorVar,
    TupleVar,
    UserObjectVar,
    raises_in_python,
    unsupported,
)
from dynajit.capture._symbolic.variables.attribute_reads import call_delattr, read_or_missing
from dynajit.capture._symbolic.variables.constant import fold
from dynajit.capture._symbolic.variables.identity import call_id, call_weakref
from dynajit.capture._symbolic.variables.new_objects import NewObjectVar
from dynajit.capture._symbolic.variables.object_protocols import format_object, hash_object, text_of_object
from dynajit.capture._symbolic.variables.reduction import object_new

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["BUILTINS", "call_builtin", "sort_items"]

Handler = Callable[["Tracer", list[VT], dict[str, VT]], VT]
BUILTINS: dict[Any, Handler] = {}

# Builtins that are pure functions of constant arguments: run them at trace time.
_PURE = {
    abs, all, any, bin, bool, chr, complex, divmod, float, format, hash, hex, int, len, max, min, oct, ord, pow,
    repr, round, str, sum, tuple, frozenset, range, slice, reversed, isinstance, issubclass, type,
    math.sqrt, math.floor, math.ceil, math.log, math.exp, math.pi.__class__, math.prod, math.isclose,
    math.gcd, math.isfinite, math.isinf, math.isnan, math.cos, math.sin, math.tan, math.log2, math.log10,
    operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.neg,
    operator.getitem, operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    operator.not_, operator.index, torch.device, torch.Size,
}  # fmt: skip


def builtin(*fns: Any) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for fn in fns:
            BUILTINS[fn] = handler
        return handler

    return register


@builtin(super)
def _super(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    from dynajit.capture._symbolic.variables.objects import make_super

    if kwargs:
        raises_in_python("super() takes no keyword arguments (TypeError)")
    return make_super(tx, args)


def call_builtin(tx: Tracer, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """Trace ``fn(*args, **kwargs)`` for a builtin or a builtin class."""
    from dynajit.capture._symbolic.variables.contexts import CONTEXT_MANAGER_CALLS

    handler = BUILTINS.get(fn) or CONTEXT_MANAGER_CALLS.get(fn)
    if handler is not None:
        return handler(tx, args, kwargs)
    if args and isinstance(args[0], NewObjectVar) and fn in _OBJECT_PROTOCOLS:
        return _OBJECT_PROTOCOLS[fn](tx, args, kwargs)
    if fn in (str, repr) and len(args) == 1 and not kwargs and isinstance(args[0], ExceptionVar):
        if args[0].cls.__module__ == "builtins":  # a builtin exception's text depends only on its arguments
            return ConstVar(fn(args[0].real()))
    if fn in _PURE and all(a.is_const() for a in [*args, *kwargs.values()]):
        return _fold_call(tx, fn, args, kwargs)
    if not kwargs and _operator_arity().get(fn) == len(args):
        from dynajit.capture._symbolic.opcodes_ops import apply_operator

        return apply_operator(tx, fn, args)  # ``operator.iadd(x, y)`` is what ``x += y`` runs
    if isinstance(fn, type) and issubclass(fn, BaseException) and not kwargs and all(a.is_const() for a in args):
        return ExceptionVar(fn, args)
    unsupported(f"call to {getattr(fn, '__qualname__', fn)!s} is not traced")


@functools.cache
def _operator_arity() -> dict[Any, int]:
    """The ``operator`` functions Python's operator opcodes run, by how many operands each takes."""
    from dynajit.capture._symbolic.opcodes_ops import BINARY_OPS, COMPARE_OPS, UNARY_OPS

    return {**dict.fromkeys([*BINARY_OPS.values(), *COMPARE_OPS.values()], 2), **dict.fromkeys(UNARY_OPS.values(), 1)}


def _object_text(convert: Any) -> Handler:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if len(args) != 1 or kwargs:
            unsupported(f"{convert.__name__}() of an object made while tracing with other arguments")
        return text_of_object(tx, args[0], convert)  # type: ignore[arg-type]

    return handler


def _object_hash(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if len(args) != 1 or kwargs:
        raises_in_python("hash() takes exactly one argument (TypeError)")
    return hash_object(tx, args[0])  # type: ignore[arg-type]


def _object_format(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if len(args) > 2 or kwargs:
        unsupported("format() of an object made while tracing with other arguments")
    return format_object(tx, args[0], args[1] if len(args) == 2 else None)  # type: ignore[arg-type]


# Builtins whose first argument is an object made while tracing: Python's protocols on its class.
_OBJECT_PROTOCOLS: dict[Any, Handler] = {
    repr: _object_text(repr),
    str: _object_text(str),
    ascii: _object_text(ascii),
    hash: _object_hash,
    format: _object_format,
}


def _fold_call(tx: Tracer, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
    const_kwargs = {k: v.const() for k, v in kwargs.items()}
    return tx.wrap_const(fold(lambda *a: fn(*a, **const_kwargs), *[a.const() for a in args]).value)


def _type_of(vt: VT) -> type:
    return vt.python_type()


@builtin(len)
def _len(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    (obj,) = args
    if isinstance(obj, TensorVar):
        if obj.metadata(tx).dim() == 0:
            unsupported("len() of a 0-d tensor raises TypeError")
        if isinstance(obj.example.shape[0], torch.SymInt):
            return obj.symbolic_sizes(tx, [ConstVar(0)], {})
        return ConstVar(obj.example.shape[0])
    if isinstance(obj, NNModuleVar):
        return ConstVar(len(obj.value))
    if isinstance(obj, DictVar):
        return ConstVar(len(obj.items))
    if isinstance(obj, SetVar):
        return ConstVar(len(obj.values))
    if isinstance(obj, (NewObjectVar, UserObjectVar)):
        return obj.length(tx)
    if isinstance(obj, IteratorVar):
        name = obj.python_type().__name__
        raises_in_python("len() of an iterator (TypeError)", TypeError(f"object of type '{name}' has no len()"))
    return ConstVar(len(obj.unpack(tx)))


@builtin(isinstance)
def _isinstance(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    obj, classes = args
    cls = classes.const()
    if isinstance(obj, TensorVar):
        return ConstVar(issubclass(obj.python_type(), cls) or (cls is torch.Tensor))
    return ConstVar(issubclass(_type_of(obj), cls))


@builtin(bool)
def _bool(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) > 1:
        raises_in_python("bool() takes at most 1 positional argument and no keywords (TypeError)")
    if not args or args[0].is_const():
        return _fold_call(tx, bool, args, kwargs)
    return ConstVar(args[0].truth(tx))


@builtin(operator.truth)
def _truth(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != 1:
        raises_in_python("truth() takes exactly one argument (TypeError)")
    return _bool(tx, args, kwargs)


def _identity_test(expected: bool) -> Handler:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.opcodes_ops import identical

        if kwargs or len(args) != 2:
            name = "is_" if expected else "is_not"
            raises_in_python(f"{name}() takes exactly two arguments (TypeError)")
        return ConstVar(identical(args[0], args[1], tx) == expected)

    return handler


BUILTINS[operator.is_], BUILTINS[operator.is_not] = _identity_test(True), _identity_test(False)


@builtin(tuple.__new__)
def _tuple_new(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    from dynajit.capture._symbolic.variables.containers import NamedTupleVar, is_named_tuple_class

    if kwargs or not 1 <= len(args) <= 2 or not args[0].is_const():
        unsupported("tuple.__new__ with other than a known class and one iterable")
    cls = args[0].const()
    from dynajit.capture._symbolic.variables.iterators import iterator_of

    items = iterator_of(tx, args[1]).unpack(tx) if len(args) == 2 else []
    if cls is tuple:
        return TupleVar(items)
    if isinstance(cls, type) and issubclass(cls, tuple) and not is_named_tuple_class(cls):
        from dynajit.capture._symbolic.construct import why_not_constructible

        reason = why_not_constructible(cls)
        if reason is not None:
            unsupported(f"tuple.__new__({cls.__qualname__}) is not traced: {reason}")
        made = NewObjectVar(cls, args[0].source)
        made.seq = TupleVar(items)
        return made
    if not is_named_tuple_class(cls):
        unsupported(f"tuple.__new__ of {getattr(cls, '__qualname__', cls)}, which is not a named tuple class")
    return NamedTupleVar(items, cls)


@builtin(torch.Size)
def _torch_size(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    from dynajit.capture._symbolic.variables.symbolic import SymIntVar

    if kwargs or len(args) > 1:
        raises_in_python("torch.Size() takes at most one iterable and no keywords (TypeError)")
    if all(a.is_const() for a in args):
        return _fold_call(tx, torch.Size, args, kwargs)
    items = args[0].unpack(tx)
    if not all(isinstance(i, SymIntVar) or (i.is_const() and type(i.const()) is int) for i in items):
        unsupported("torch.Size() of other than ints")
    return SizeVar(items)


@builtin(functools.partial)
def _partial(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    from dynajit.capture._symbolic.variables.functions import PartialVar

    if not args:
        raises_in_python("partial() needs a callable (TypeError)")
    if isinstance(args[0], PartialVar):  # partial(partial(f, a), b) is partial(f, a, b), as Python flattens it
        inner = args[0]
        return PartialVar(inner.func, [*inner.args, *args[1:]], {**inner.keywords, **kwargs})
    return PartialVar(args[0], list(args[1:]), dict(kwargs))


def _type_info(info: Any) -> Handler:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if not all(a.is_const() for a in [*args, *kwargs.values()]):
            unsupported(f"torch.{info.__name__} of other than a known dtype")
        # A fact of its dtype argument (guarded where it came from; without one, the default dtype,
        # which the global state guard covers).
        return _fold_call(tx, info, args, kwargs)

    return handler


@builtin(object)
def _object(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``object()``: a plain new object (a sentinel), rebuilt with ``object()`` if it escapes."""
    if args or kwargs:
        raises_in_python("object() takes no arguments (TypeError)", TypeError("object() takes no arguments"))
    return NewObjectVar(object, None)


BUILTINS[id] = call_id
BUILTINS[weakref.ref] = call_weakref
BUILTINS[delattr] = call_delattr
BUILTINS[object.__new__] = object_new
BUILTINS[torch.finfo] = _type_info(torch.finfo)
BUILTINS[torch.iinfo] = _type_info(torch.iinfo)


@builtin(issubclass)
def _issubclass(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return ConstVar(issubclass(args[0].const(), args[1].const()))


@builtin(type)
def _type(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if len(args) != 1:
        unsupported("type() with three arguments creates a class")
    (obj,) = args
    if isinstance(obj, NewObjectVar):
        return tx.wrap(obj.cls, obj.class_source)
    # Reached again as obj.__class__, so reads of its attributes are guarded like any other.
    path = class_path(obj.source, getattr(obj, "value", None)) if not isinstance(obj, TensorVar) else None
    return tx.wrap(_type_of(obj), path)


@builtin(callable)
def _callable(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != 1:
        raises_in_python("callable() takes exactly one argument (TypeError)")
    (obj,) = args
    if isinstance(obj, TensorVar):
        return ConstVar(False)
    if isinstance(obj, NewObjectVar):
        return ConstVar(callable(obj.cls))  # whether its class defines __call__ (the class is guarded)
    held = getattr(obj, "value", _NOTHING)
    if held is not _NOTHING:
        return ConstVar(callable(held))  # the object itself (its type is guarded, and __call__ lives there)
    try:
        cls = obj.python_type()
    except Unsupported:
        unsupported(f"callable({obj}) could not be decided while tracing")
    return ConstVar(hasattr(cls, "__call__"))  # noqa: B004  (an instance is callable when its class defines it)


_NOTHING = object()


@builtin(range)
def _range(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return _fold_call(tx, range, args, kwargs)


@builtin(list)
def _list(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return ListVar(args[0].unpack(tx) if args else [])


@builtin(tuple)
def _tuple(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return TupleVar(args[0].unpack(tx) if args else [])


@builtin(set, frozenset)
def _set(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return SetVar(args[0].unpack(tx) if args else [])


@builtin(dict)
def _dict(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    from dynajit.capture._symbolic.variables.collections_ import dict_of

    return dict_of(tx, args, kwargs, DictVar({}))


@builtin(slice)
def _slice(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return SliceVar(list(args))


@builtin(sum)
def _sum(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    from dynajit.capture._symbolic.opcodes_ops import apply_operator

    items = args[0].unpack(tx)
    total: VT = args[1] if len(args) > 1 else kwargs.get("start", ConstVar(0))
    for item in items:
        total = apply_operator(tx, operator.add, [total, item])
    return total


@builtin(sorted)
def _sorted(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if len(args) != 1 or kwargs.keys() - {"key", "reverse"}:
        raises_in_python("sorted() takes one iterable and only the keywords key and reverse (TypeError)")
    return ListVar(sort_items(tx, args[0].unpack(tx), kwargs.get("key"), kwargs.get("reverse")))


def sort_items(tx: Tracer, items: list[VT], key: VT | None, reverse: VT | None) -> list[VT]:
    """``items`` in the order ``sorted(items, key=key, reverse=reverse)`` gives, comparing keys with traced ``<``.

    Python's own sort orders them (so stability and ``reverse`` are exactly its own); only the keys'
    comparisons are traced: constants fold, symbolic sizes are decided and guarded, and tensors, whose
    order depends on their data, are a graph break.
    """
    from dynajit.capture._symbolic.opcodes_ops import apply_operator

    if key is not None and not (key.is_const() and key.const() is None):
        keys = [key.call(tx, [item], {}) for item in items]
    else:
        keys = items
    if len(keys) > 1 and any(isinstance(k, TensorVar) for k in keys):
        unsupported("sorting tensors compares their values, which needs their data")

    class Keyed:
        def __init__(self, key: VT, item: VT) -> None:
            self.key, self.item = key, item

        def __lt__(self, other: Keyed) -> bool:
            return apply_operator(tx, operator.lt, [self.key, other.key]).truth(tx)

    descending = False if reverse is None else reverse.const()
    try:
        ordered = sorted((Keyed(k, item) for k, item in zip(keys, items)), reverse=descending)
    except Unsupported:
        raise
    except Exception as exc:  # a bad ``reverse``
        raises_in_python(f"sorting raises {type(exc).__name__}: {exc}")
    return [keyed.item for keyed in ordered]


@builtin(abs)
def _abs(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if isinstance(args[0], TensorVar):
        return tx.output.call_function(torch.abs, args, {})
    return _fold_call(tx, abs, args, kwargs)


def _all_any(pick: Any) -> Handler:
    def handler(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.variables.iterators import iterator_of

        if kwargs or len(args) != 1:
            raises_in_python(f"{pick.__name__}() takes exactly one argument (TypeError)")
        iterator = iterator_of(tx, args[0])
        # Items are taken one at a time and the first deciding one stops it, as in Python (a generator
        # behind it runs no further).
        while (item := iterator.next()) is not None:
            if item.truth(tx) is (pick is any):
                return ConstVar(pick is any)
        return ConstVar(pick is all)

    return handler


BUILTINS[all] = _all_any(all)
BUILTINS[any] = _all_any(any)


@builtin(vars)
def _vars(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != 1:
        if not args and not kwargs:
            unsupported("vars() without an argument reads the frame's locals")
        raises_in_python("vars() takes at most 1 argument (TypeError)")
    found = read_or_missing(tx, args[0], "__dict__")
    if found is None:
        message = "vars() argument must have __dict__ attribute"
        raises_in_python(f"{message} (TypeError)", TypeError(message))
    return found


@builtin(getattr)
def _getattr(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or not 2 <= len(args) <= 3:
        raises_in_python("getattr() takes two or three positional arguments (TypeError)")
    obj, name = args[0], args[1].const()
    if len(args) > 2:
        found = read_or_missing(tx, obj, name)
        return args[2] if found is None else found
    return obj.getattr(tx, name)


@builtin(hasattr)
def _hasattr(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    obj, name = args[0], args[1].const()
    if obj.is_const() and not isinstance(obj, TensorVar):
        return ConstVar(hasattr(obj.const(), name))
    if isinstance(obj, NewObjectVar) and name not in obj.attrs:
        return ConstVar(obj.has_attr(tx, name))
    return ConstVar(read_or_missing(tx, obj, name) is not None)


@builtin(setattr)
def _setattr(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    args[0].setattr(tx, args[1].const(), args[2])
    return ConstVar(None)


@builtin(object.__setattr__)
def _object_setattr(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    from dynajit.capture._symbolic.variables.new_objects import NewObjectVar

    if not kwargs and len(args) == 3 and isinstance(args[0], UserObjectVar) and args[1].is_const():
        args[0].store(tx, args[1].const(), args[2])  # the plain write, skipping the class's own __setattr__
        return ConstVar(None)
    if kwargs or len(args) != 3 or not isinstance(args[0], NewObjectVar):
        unsupported("object.__setattr__ of an object not created while tracing")
    return args[0].base_call(tx, "__setattr__", args[1:], {})


@builtin(object.__getattribute__)
def _object_getattribute(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != 2 or not isinstance(args[0], UserObjectVar) or not args[1].is_const():
        unsupported("object.__getattribute__ of other than an object of the frame and a constant name")
    obj, name = args[0], args[1].const()
    return obj.pending(tx, name) or obj.read_plain(tx, name)  # the plain read, skipping the class's override


@builtin(print)
def _print(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    unsupported("print() has an effect outside the graph")


# The builtins over iterables (iter, next, zip, map, min, itertools, ...) live with their lazy iterators.
import dynajit.capture._symbolic.builtins_iter  # noqa: E402, F401  (registers its handlers in BUILTINS)
