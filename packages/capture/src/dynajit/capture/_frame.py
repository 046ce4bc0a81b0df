"""The contract between frame conversion and the runtime that caches and runs converted frames.

The runtime (``_runtime``: the ``optimize`` wrapper, the generated dispatcher,
the code cache, interception) calls :func:`convert_frame` on a cache miss with
the frame's argument values; the converter (the symbolic interpreter and its
code generation) returns a :class:`ConvertedFrame`: guards to protect it, and
a transformed code object with the same argument layout as the original.
"""

from __future__ import annotations

import traceback
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from dynajit.guards import GuardSet

__all__ = [
    "CompiledGraph",
    "ConvertedFrame",
    "FrameContext",
    "GraphBreak",
    "SkipFrame",
    "Unsupported",
]


class Unsupported(Exception):
    """Something the symbolic interpreter cannot trace: a graph break, or an error under fullgraph/export."""

    def __init__(self, reason: str, *, user_stack: Sequence[traceback.FrameSummary] = ()) -> None:
        super().__init__(reason)
        self.reason = reason
        self.user_stack = list(user_stack)

    def __str__(self) -> str:
        if not self.user_stack:
            return self.reason
        where = self.user_stack[-1]
        return f"{self.reason}\n  at {where.filename}:{where.lineno} in {where.name}\n    {where.line or ''}".rstrip()


class SkipFrame(Exception):
    """The frame has nothing worth compiling (no tensor operation, or a construct that forbids it).

    The runtime caches an entry that runs the original code for the given guards.
    """

    def __init__(self, reason: str, guards: GuardSet | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.guards = guards


@dataclass(frozen=True)
class GraphBreak:
    """Where and why a graph was cut."""

    reason: str
    user_stack: tuple[traceback.FrameSummary, ...]

    @property
    def location(self) -> str:
        if not self.user_stack:
            return "<unknown>"
        frame = self.user_stack[-1]
        return f"{frame.filename}:{frame.lineno}"

    def __str__(self) -> str:
        return f"{self.reason} (at {self.location})"


@dataclass
class CompiledGraph:
    """One captured graph and what the backend returned for it."""

    name: str
    graph_module: torch.fx.GraphModule
    compiled: Callable[..., Any]
    example_inputs: list[Any]
    compile_seconds: float


@dataclass
class FrameContext:
    """What the runtime tells the converter about the compilation in progress."""

    backend: Callable[..., Any]
    fullgraph: bool = False
    dynamic: bool | None = None
    export: bool = False
    # With export: how many leading arguments are bound to the function exported (a module's ``self``).
    export_bound: int = 0
    # Returns the compiled wrapper of a user function (same backend, same settings), or the object itself.
    intercept: Callable[[Any], Any] = lambda obj: obj
    # Sizes seen to change for this code object (source name -> dims), used to mark dims dynamic.
    dynamic_hints: dict[str, set[int]] = field(default_factory=dict)
    # Int arguments seen to change for this code object: they become symbolic graph inputs.
    dynamic_ints: set[str] = field(default_factory=set)
    # The sizes earlier compiles of this code object saw for tensors reached through attributes and items
    # (automatic dynamic shapes beyond the arguments); None when sizes are not learned (dynamic=False).
    traced_sizes: Any = None

    def traced_dynamic_dims(self, name: str, size: tuple[int, ...]) -> set[int]:
        """Record that this compile sees the tensor at path ``name`` with ``size``; the dims seen to change."""
        return set() if self.traced_sizes is None else set(self.traced_sizes.note(name, size))

    def traced_int_changed(self, name: str, value: int) -> bool:
        """Record that this compile reads ``value`` at path ``name``; whether an earlier compile read another."""
        return self.traced_sizes is not None and self.traced_sizes.note_int(name, value)


@dataclass
class ConvertedFrame:
    """A converted frame: guards, and new code that calls the compiled graphs."""

    original_code: types.CodeType
    code: types.CodeType
    guards: GuardSet
    graphs: list[CompiledGraph]
    graph_breaks: list[GraphBreak]
    # Names the transformed code reads as globals (compiled graphs, resume functions, helpers).
    # The runtime installs them in the function's globals before the first run.
    new_globals: dict[str, Any]
    # Under ``FrameContext.export``: a GraphModule taking the function's arguments (signature order)
    # and returning the function's output structure.
    export_graph_module: torch.fx.GraphModule | None = None
