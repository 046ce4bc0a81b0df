"""Observing compilation: one :class:`FrameRecord` per converted frame, handed to every active observer.

The runtime reports each conversion (a cache miss that converted a frame, or
an ``export``) with what it produced: the graphs and their compile times, the
graph breaks with the user's stack, the guards and why the cached entries did
not apply. Observing costs nothing while no observer is active: the runtime
checks :func:`active` before gathering anything.
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dynajit.capture._frame import CompiledGraph, GraphBreak

__all__ = ["FRAME_KINDS", "FrameRecord", "Observation", "active", "notify", "observe"]

# The outcome of a conversion: the kinds a FrameRecord can have.
FRAME_KINDS = {
    "compiled": "the frame was converted: its graphs run, with Python in between at each graph break",
    "skip": "nothing to compile (no tensor operation, or a construct that forbids it): the frame runs in Python",
    "eager": "conversion failed inside dynajit or the backend: the frame runs eagerly from now on",
    "error": "conversion raised to the caller (a graph break under fullgraph=True, or an internal error)",
    "export": "the frame was captured by export as one graph",
    "cache_limit": "config.cache_size_limit was reached: the frame runs eagerly on these inputs",
}


@dataclass(frozen=True)
class FrameRecord:
    """What converting one frame produced.

    Attributes:
        code: the code object converted (a resume function's own code after a graph break).
        name: the function's qualified name.
        kind: the outcome, one of ``compiled``, ``skip``, ``eager``, ``error``, ``export``,
            ``cache_limit`` (see ``FRAME_KINDS``).
        graphs: the captured graphs in order (``graph_module``, ``compile_seconds``, ...).
        graph_breaks: where and why the frame's graph was cut, each with the full user stack
            (innermost frame last).
        guards: the ``GuardSet`` protecting the new entry (None when it is unguarded).
        recompile_reasons: for a recompile, why each cached entry's guards failed
            (``"<compile id>: <reason>"``); empty on a first conversion.
        reason: why a ``skip``, ``eager``, ``error`` or ``cache_limit`` frame was not compiled.
        compile_id: the cache entry's id (None when no entry was cached).
        seconds: wall-clock time of the whole conversion, backend compiles included.
    """

    code: types.CodeType
    name: str
    kind: str
    graphs: tuple[CompiledGraph, ...] = ()
    graph_breaks: tuple[GraphBreak, ...] = ()
    guards: Any = None
    recompile_reasons: tuple[str, ...] = ()
    reason: str = ""
    compile_id: int | None = None
    seconds: float = 0.0

    @property
    def location(self) -> str:
        """``file:line`` of the converted code's first line."""
        return f"{self.code.co_filename}:{self.code.co_firstlineno}"


@dataclass
class Observation:
    """The frames converted while an :func:`observe` block was open, in order."""

    frames: list[FrameRecord] = field(default_factory=list)

    @property
    def graphs(self) -> list[CompiledGraph]:
        """Every captured graph, in compile order."""
        return [graph for frame in self.frames for graph in frame.graphs]

    @property
    def graph_breaks(self) -> list[GraphBreak]:
        """Every graph break, in the order the frames were converted."""
        return [brk for frame in self.frames for brk in frame.graph_breaks]


_observers: list[Callable[[FrameRecord], None]] = []
_lock = threading.Lock()


def active() -> bool:
    """True while some observer is registered (the runtime gathers records only then)."""
    return bool(_observers)


def notify(record: FrameRecord) -> None:
    """Hand ``record`` to every active observer, oldest first."""
    for observer in list(_observers):
        observer(record)


@contextlib.contextmanager
def observe(callback: Callable[[FrameRecord], None] | None = None) -> Iterator[Observation]:
    """Observe every frame dynajit converts while the block runs (in any thread).

    Yields an :class:`Observation` whose ``frames`` list grows with one
    :class:`FrameRecord` per conversion: the code, its graphs (graph module,
    compile time), graph breaks (reason and full user stack), guards and the
    reasons for a recompile. ``callback``, if given, is also called with each
    record as soon as the frame is converted. Blocks nest; each sees every frame.
    An exception raised by ``callback`` propagates to the call that converted
    the frame.

    Args:
        callback: called with each ``FrameRecord``.

    Yields:
        The ``Observation`` being filled.

    Example:
        >>> import torch, dynajit.capture as capture
        >>> from dynajit.capture.testing import CompileCounter
        >>> @capture.optimize(CompileCounter())
        ... def f(x):
        ...     return torch.sin(x) + 1
        >>> with capture.observe() as seen:
        ...     _ = f(torch.ones(2))
        >>> [(frame.name, frame.kind, len(frame.graphs)) for frame in seen.frames]
        [('f', 'compiled', 1)]
    """
    observation = Observation()

    def record(frame: FrameRecord) -> None:
        observation.frames.append(frame)
        if callback is not None:
            callback(frame)

    with _lock:
        _observers.append(record)
    try:
        yield observation
    finally:
        with _lock:
            _observers.remove(record)
