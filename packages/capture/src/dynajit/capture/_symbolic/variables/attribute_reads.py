"""``hasattr`` and ``getattr`` with a default: an attribute read that may raise AttributeError.

Python answers both by reading the attribute and catching AttributeError, so a property's getter (or a
``__getattr__``) runs. The read is traced like any other; it counts as missing when it raises
AttributeError in a way the trace knows exactly: an absence guarded where it was found
(:class:`AttributeMissing`) or an ``AttributeError`` the traced code raised itself (``raise
AttributeError(...)`` in a getter). Any other exception propagates as Python propagates it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dynajit.capture._frame import Unsupported
from dynajit.capture._symbolic.variables.base import VT, AttributeMissing, RaisesInPython, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["call_delattr", "missing_as_none", "read_or_missing"]


def read_or_missing(tx: Tracer, obj: VT, name: str) -> VT | None:
    """``obj.name`` traced, or None when Python's read raises AttributeError (which ``hasattr`` catches)."""
    return missing_as_none(tx, lambda: obj.getattr(tx, name), f"hasattr({obj}, {name!r})")


def missing_as_none(tx: Tracer, read: Callable[[], VT], what: str) -> VT | None:
    """``read()`` traced, or None when it raises AttributeError as the trace knows exactly (``what`` names the
    read in the graph break when it cannot be traced)."""
    from dynajit.capture._symbolic.exceptions import known_exception

    try:
        return read()
    except AttributeMissing:
        tx.output.current_tx = tx
        return None
    except RaisesInPython as exc:
        value = known_exception(exc)
        if value is None or not issubclass(value.cls, AttributeError):
            raise
        tx.output.current_tx = tx  # an inlined getter raised: tracing continues in this frame
        return None
    except Unsupported as exc:  # a read that cannot be traced: Python decides
        unsupported(f"{what} could not be decided while tracing: {exc.reason}")


def call_delattr(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``delattr(obj, name)`` of an object made while tracing (the deletion is part of its rebuilt state)."""
    from dynajit.capture._symbolic.variables.constant import ConstVar
    from dynajit.capture._symbolic.variables.new_objects import NewObjectVar

    if kwargs or len(args) != 2 or not args[1].is_const() or not isinstance(args[1].const(), str):
        unsupported("delattr() with other than an object and a constant name")
    if not isinstance(args[0], NewObjectVar):
        unsupported(f"delattr() of {args[0]}: deleting attributes of existing objects is not traced")
    args[0].delete(tx, args[1].const())
    return ConstVar(None)
