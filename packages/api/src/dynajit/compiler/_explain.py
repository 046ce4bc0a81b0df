"""``explain``: compile a function once and report its graphs, graph breaks, ops, guards and compile times.

It is built on capture's public ``observe()``: one record per converted frame
with its graphs and compile times, graph breaks (reason and full user stack)
and guards. It starts from an empty code cache (it calls ``reset()``), so
every frame is converted afresh and an earlier compile's entries cannot hide graphs.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

import dynajit.capture as _capture
from dynajit.compiler._compile import CompileSettings, resolve_backend
from dynajit.compiler._module import OptimizedModule

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
    recompile_reasons: list[str] = field(default_factory=list)

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
        if self.recompile_reasons:
            lines.append("Recompile reasons:")
            lines.extend(f"  {reason}" for reason in self.recompile_reasons)
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


def _output_from(observation: _capture.Observation) -> ExplainOutput:
    """The report of the frames converted while ``explain`` observed: every graph, break and guard, in order."""
    output = ExplainOutput()
    for frame in observation.frames:
        output.graphs.extend(graph.graph_module for graph in frame.graphs)
        output.compile_times.extend(graph.compile_seconds for graph in frame.graphs)
        output.break_reasons.extend(BreakReason(brk.reason, tuple(brk.user_stack)) for brk in frame.graph_breaks)
        output.recompile_reasons.extend(frame.recompile_reasons)
        if frame.guards is not None:
            output.guards.extend(line.strip() for line in str(frame.guards).splitlines() if line.strip())
    output.graph_count = len(output.graphs)
    output.ops_per_graph = [_graph_ops(gm) for gm in output.graphs]
    output.op_count = sum(len(ops) for ops in output.ops_per_graph)
    output.graph_break_count = len(output.break_reasons)
    return output


def explain(fn: Callable[..., Any], *, backend: str | Callable[..., Any] = "eager") -> Callable[..., ExplainOutput]:
    """Report how dynajit compiles ``fn``: its graphs, graph breaks and why, ops, guards, compile times.

    ``explain(fn)(*args, **kwargs)`` compiles and runs ``fn`` once on the given
    arguments (its side effects happen once) and returns an :class:`ExplainOutput`
    whose ``str()`` is a readable report. Use it to find graph breaks to remove.
    Like ``reset()``, its first call forgets everything compiled so far; later
    calls of the same returned function keep what was compiled, so a call
    whose inputs fail the earlier guards reports the recompile and why
    (``recompile_reasons``: which guard failed, naming the dimension for a
    size change).

    Args:
        fn: a function or an ``nn.Module`` (a compiled ``OptimizedModule`` is explained
            through the module it wraps).
        backend: the backend the graphs are compiled with (default ``"eager"``: the
            report is about capture, so no code generation is needed).

    Returns:
        A function taking ``fn``'s arguments and returning an :class:`ExplainOutput`
        (``graphs``, ``graph_count``, ``graph_break_count``, ``break_reasons`` with
        user stacks, ``op_count``, ``ops_per_graph``, ``guards``, ``compile_times``,
        ``recompile_reasons``) for the frames that call converted.

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
    target = fn._orig_mod if isinstance(fn, OptimizedModule) else fn  # explain the module, not the wrapper
    compiled: list[Callable[..., Any]] = []

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> ExplainOutput:
        if not compiled:
            _capture.reset()
            compiled.append(CompileSettings(backend=real_backend).apply(target))
        compiled_fn = compiled[0]
        with _capture.observe() as observation:
            compiled_fn(*args, **kwargs)
        return _output_from(observation)

    return run
