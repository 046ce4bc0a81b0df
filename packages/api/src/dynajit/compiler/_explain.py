"""``explain``: compile a function once and report its graphs, graph breaks, ops, guards and compile times.

It relies only on what capture exposes: the backend contract (a recording
wrapper around the real backend sees every graph), the ``graph_breaks`` log
artifact (every break with its reason and user stack) and the ``guards`` log
artifact (each compiled entry's guards). It starts from an empty code cache
(it calls ``reset()``), so every frame is converted afresh and an earlier
compile's entries (which count towards ``cache_size_limit``) cannot hide graphs.
"""

from __future__ import annotations

import contextlib
import functools
import linecache
import logging
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

import dynajit.capture as _capture
from dynajit.compiler._compile import CompileSettings, resolve_backend
from dynajit.compiler._module import OptimizedModule
from dynajit.fxgraph import artifact_logger

__all__ = ["BreakReason", "ExplainOutput", "explain"]

_OP_KINDS = ("call_function", "call_method", "call_module")


@dataclass(frozen=True)
class BreakReason:
    """One graph break: why the graph was cut, and where in the user's code."""

    reason: str
    user_stack: tuple[traceback.FrameSummary, ...] = ()

    def __str__(self) -> str:
        lines = [self.reason]
        for frame in self.user_stack:
            lines.append(f"  {frame.filename}:{frame.lineno} in {frame.name}")
            if frame.line:
                lines.append(f"    {frame.line.strip()}")
        return "\n".join(lines)


@dataclass
class ExplainOutput:
    """What compiling a function produced: returned by ``explain(fn)(*args)``."""

    graphs: list[torch.fx.GraphModule] = field(default_factory=list)
    graph_count: int = 0
    graph_break_count: int = 0
    break_reasons: list[BreakReason] = field(default_factory=list)
    op_count: int = 0
    ops_per_graph: list[list[Any]] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    compile_times: list[float] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Op count: {self.op_count}",
        ]
        if self.break_reasons:
            lines.append("Break reasons:")
            for number, reason in enumerate(self.break_reasons, 1):
                lines.extend(_indent(f"{number}. {reason}", 2))
        if self.ops_per_graph:
            lines.append("Ops per graph:")
            for number, ops in enumerate(self.ops_per_graph, 1):
                lines.append(f"  Graph {number}: {', '.join(_op_name(op) for op in ops) or '(no ops)'}")
        if self.guards:
            lines.append("Guards:")
            lines.extend(f"  {guard}" for guard in self.guards)
        if self.compile_times:
            total = sum(self.compile_times)
            each = ", ".join(f"graph {n} {seconds:.4f}s" for n, seconds in enumerate(self.compile_times, 1))
            lines.append(f"Compile times: {total:.4f}s in total ({each})")
        return "\n".join(lines)


def _indent(text: str, spaces: int) -> list[str]:
    return [" " * spaces + line for line in text.splitlines()]


def _op_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None)
    name = getattr(target, "__name__", None)
    if module and name and getattr(sys.modules.get(module), name, None) is target:
        return name if module in ("builtins", "_operator", "operator") else f"{module}.{name}"
    return getattr(target, "__qualname__", None) or name or repr(target)


def _graph_ops(gm: torch.fx.GraphModule) -> list[Any]:
    return [node.target for node in gm.graph.nodes if node.op in _OP_KINDS]


class _RecordCollector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _collect(artifact: str) -> Iterator[list[logging.LogRecord]]:
    """Collect an artifact's records; an artifact the user has not switched on stays silent on stderr."""
    logger = artifact_logger(artifact)
    collector = _RecordCollector()
    saved_level, saved_propagate = logger.level, logger.propagate
    was_enabled = logger.isEnabledFor(logging.INFO)
    logger.addHandler(collector)
    if not was_enabled:
        logger.setLevel(logging.INFO)
        logger.propagate = False
    try:
        yield collector.records
    finally:
        logger.removeHandler(collector)
        logger.setLevel(saved_level)
        logger.propagate = saved_propagate


_LOCATION = re.compile(r" at (?P<file>\S+):(?P<line>\d+)")


def _break_reason(record: logging.LogRecord) -> BreakReason:
    """A break from a record: its ``graph_break`` extra (a ``GraphBreak``), else its message's ``at file:line``."""
    graph_break = getattr(record, "graph_break", None)
    if graph_break is not None:
        return BreakReason(str(graph_break.reason), tuple(graph_break.user_stack))
    message = record.getMessage()
    first, *rest = message.splitlines()
    location = _LOCATION.search(first)
    if location is None:
        return BreakReason(message)
    filename, lineno = location["file"], int(location["line"])
    source = rest[0].strip() if rest else (linecache.getline(filename, lineno).strip() or None)
    frame = traceback.FrameSummary(filename, lineno, "<unknown>", line=source)
    return BreakReason(first[: location.start()].strip().removeprefix("Graph break: "), (frame,))


def _guard_lines(record: logging.LogRecord) -> list[str]:
    guards = getattr(record, "guards", None)
    text = str(guards) if guards is not None else record.getMessage()
    return [line.strip() for line in text.splitlines() if line.strip()]


def explain(fn: Callable[..., Any], *, backend: str | Callable[..., Any] = "eager") -> Callable[..., ExplainOutput]:
    """Report how dynajit compiles ``fn``: its graphs, graph breaks and why, ops, guards, compile times.

    ``explain(fn)(*args, **kwargs)`` compiles and runs ``fn`` once on the given
    arguments (its side effects happen once) and returns an :class:`ExplainOutput`
    whose ``str()`` is a readable report. Use it to find graph breaks to remove.
    Like ``reset()``, it first forgets everything compiled so far.

    Args:
        fn: a function or an ``nn.Module`` (a compiled ``OptimizedModule`` is explained
            through the module it wraps).
        backend: the backend the graphs are compiled with (default ``"eager"``: the
            report is about capture, so no code generation is needed).

    Returns:
        A function taking ``fn``'s arguments and returning an :class:`ExplainOutput`
        (``graphs``, ``graph_count``, ``graph_break_count``, ``break_reasons`` with
        user stacks, ``op_count``, ``ops_per_graph``, ``guards``, ``compile_times``).

    Example:
        >>> import torch, dynajit.compiler
        >>> def f(x):
        ...     x = x.sin()
        ...     print("here")  # a graph break
        ...     return x.cos()
        >>> report = dynajit.compiler.explain(f)(torch.ones(2))
        here
        >>> report.graph_count, report.graph_break_count
        (2, 1)
    """
    real_backend = resolve_backend(backend)

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        output = ExplainOutput()

        def recording_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
            start = time.perf_counter()
            compiled = real_backend(gm, example_inputs)
            output.compile_times.append(time.perf_counter() - start)
            output.graphs.append(gm)
            return compiled

        _capture.reset()
        target = fn._orig_mod if isinstance(fn, OptimizedModule) else fn  # explain the module, not the wrapper
        compiled_fn = CompileSettings(backend=recording_backend).apply(target)
        with _collect("graph_breaks") as breaks, _collect("guards") as guards:
            compiled_fn(*args, **kwargs)
        output.graph_count = len(output.graphs)
        output.ops_per_graph = [_graph_ops(gm) for gm in output.graphs]
        output.op_count = sum(len(ops) for ops in output.ops_per_graph)
        output.break_reasons = [_break_reason(record) for record in breaks]
        output.graph_break_count = len(output.break_reasons)
        output.guards = [line for record in guards for line in _guard_lines(record)]
        return output

    return run
