"""``typing`` introspection on constants: ``get_origin``/``get_args`` and subscripts such as ``List[int]``.

(The functions evaluated here are listed in ``functions.py``, which calls ``call_typing_function``.)

These are pure functions of immutable typing objects, but their Python code
(caches, ``sys._getframe`` for the module name of a new alias) cannot be
traced; they are evaluated for real at trace time instead. Every input must be
known: a constant, a class (guarded by identity) or a typing object, which
is guarded by identity when it is read from the frame (``typing.List`` is a
module attribute a program could rebind).
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.variables.base import VT, raises_in_python
from dynajit.capture._symbolic.variables.containers import TupleVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["call_typing_function", "is_typing_object", "subscript_typing_object"]

_NOT_KNOWN = object()


def is_typing_object(value: Any) -> bool:
    """A typing special form or alias (``typing.List``, ``Optional[int]``, ``list[int]``, ``int | None``)."""
    return (type(value).__module__ == "typing" and not isinstance(value, type)) or isinstance(
        value, (types.GenericAlias, types.UnionType)
    )


def _known(tx: Tracer, vt: VT) -> Any:
    """The real value of ``vt`` when it is a constant, class or typing object (guarded), else _NOT_KNOWN."""
    if isinstance(vt, TupleVar):
        items = [_known(tx, item) for item in vt.items]
        return _NOT_KNOWN if any(item is _NOT_KNOWN for item in items) else tuple(items)
    if vt.is_const():
        return vt.const()
    value = getattr(vt, "value", _NOT_KNOWN)
    if isinstance(value, type):
        return value  # a class tracker is guarded by identity when it has a path
    if value is not _NOT_KNOWN and is_typing_object(value):
        tx.output.guard("id_match", vt.source, value)
        return value
    return _NOT_KNOWN


def _evaluate(tx: Tracer, action: Any, what: str) -> VT:
    try:
        result = action()
    except Exception as exc:
        raises_in_python(f"{what} raises {type(exc).__name__}: {exc}", exc)
    return tx.wrap(result, None)


def call_typing_function(tx: Tracer, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT | None:
    """``fn(*args, **kwargs)`` for one of ``TYPING_FUNCTIONS`` evaluated now; None when an input is not known."""
    values = [_known(tx, a) for a in args]
    keywords = {k: _known(tx, v) for k, v in kwargs.items()}
    if any(v is _NOT_KNOWN for v in [*values, *keywords.values()]):
        return None
    return _evaluate(tx, lambda: fn(*values, **keywords), f"typing.{fn.__name__}()")


def subscript_typing_object(tx: Tracer, obj: VT, key: VT) -> VT | None:
    """``obj[key]`` of a typing object (``typing.List[int]``) evaluated now; None when an input is not known."""
    value, index = _known(tx, obj), _known(tx, key)
    if value is _NOT_KNOWN or index is _NOT_KNOWN or not is_typing_object(value):
        return None
    return _evaluate(tx, lambda: value[index], f"subscripting {value!r}")
