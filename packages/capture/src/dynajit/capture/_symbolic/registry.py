"""The opcode table: handlers registered by opcode name with version bounds, and explicit graph-break entries."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["BREAKS", "HANDLERS", "breaks", "handler", "lookup"]

Handler = Callable[["Tracer", "Inst"], Any]

# opname -> [(since, until, handler)]; ``until`` is exclusive.
HANDLERS: dict[str, list[tuple[tuple[int, int], tuple[int, int], Handler]]] = {}
# opname -> reason the instruction is a graph break.
BREAKS: dict[str, str] = {}

_OLDEST = (3, 11)
_NEWEST = (9, 99)


def handler(
    *opnames: str, since: tuple[int, int] = _OLDEST, until: tuple[int, int] = _NEWEST
) -> Callable[[Handler], Handler]:
    """Register the decorated function for ``opnames`` on versions ``since <= v < until``."""

    def register(fn: Handler) -> Handler:
        for name in opnames:
            HANDLERS.setdefault(name, []).append((since, until, fn))
        return fn

    return register


def breaks(reason: str, *opnames: str) -> None:
    """Declare ``opnames`` graph breaks with ``reason``."""
    for name in opnames:
        BREAKS[name] = reason


def lookup(opname: str, version: tuple[int, int] | None = None) -> Handler | None:
    """The handler of ``opname`` on ``version`` (the running one by default)."""
    version = version or sys.version_info[:2]
    for since, until, fn in HANDLERS.get(opname, ()):
        if since <= version < until:
            return fn
    return None
