"""``threading.local`` objects reached from the frame: attribute reads of the calling thread's values.

Each thread sees its own attributes, so a value read while tracing is the
compiling thread's. It is guarded through its attribute path, which the
guards evaluate in the thread making each call: a thread whose value differs
(or lacks the attribute, whose absence is guarded too) recompiles or takes
another entry. Writes are replayed after the graph by a plain attribute store
in the calling thread. Subclasses of ``threading.local`` (which may define
methods and ``__init__`` run per thread) are not modelled.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.paths import Attr
from dynajit.capture._symbolic.variables.base import VT, attribute_missing, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["is_thread_local", "read_thread_local"]


def is_thread_local(value: Any) -> bool:
    """A plain ``threading.local()`` object."""
    return type(value) is threading.local


def read_thread_local(tx: Tracer, obj: VT, value: Any, name: str) -> VT:
    """``local.name`` in this thread, guarded through its path (per calling thread)."""
    if obj.source is None:
        unsupported("reading a threading.local that cannot be reached from the frame to guard the read")
    if name == "__dict__":
        unsupported("the __dict__ of a threading.local (one per thread)")
    try:
        found = getattr(value, name)
    except AttributeError:
        attribute_missing(tx, obj.source, name, f"'_thread._local' object has no attribute {name!r}")
    return tx.wrap(found, Attr(obj.source, name))
