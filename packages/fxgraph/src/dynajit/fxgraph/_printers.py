"""Printers: a graph as a table of nodes, and as its generated code annotated with the user's source lines."""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph._meta import EXAMPLE_VALUE, STACK_TRACE
from dynajit.fxgraph._recapture import line_node_map
from dynajit.fxgraph._targets import target_name

__all__ = ["format_example_value", "format_readable", "format_tabular", "user_source_line"]

_COLUMNS = ("opcode", "name", "target", "args", "kwargs")
_FRAME = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<fn>\S+)\n(?P<code>[^\n]*)')


def _graph_of(graph_or_module: torch.fx.Graph | torch.fx.GraphModule) -> torch.fx.Graph:
    if isinstance(graph_or_module, torch.fx.GraphModule):
        return graph_or_module.graph
    if isinstance(graph_or_module, torch.fx.Graph):
        return graph_or_module
    raise TypeError(f"expected a torch.fx.Graph or GraphModule, got {type(graph_or_module).__name__}")


def _format_arg(value: Any) -> str:
    if isinstance(value, torch.fx.Node):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(_format_arg(item) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_format_arg(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_format_arg(item)}" for key, item in value.items()) + "}"
    if callable(value) and not isinstance(value, torch.Tensor):
        return target_name(value)
    return repr(value)


def format_tabular(graph_or_module: torch.fx.Graph | torch.fx.GraphModule) -> str:
    """One row per node: opcode, name, target, args and kwargs, in aligned columns."""
    rows = [
        (
            node.op,
            node.name,
            target_name(node.target),
            _format_arg(tuple(node.args)),
            "{" + ", ".join(f"{key}: {_format_arg(value)}" for key, value in node.kwargs.items()) + "}",
        )
        for node in _graph_of(graph_or_module).nodes
    ]
    widths = [max(len(row[i]) for row in [_COLUMNS, *rows]) for i in range(len(_COLUMNS))]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    rule = "  ".join("-" * width for width in widths)
    return "\n".join([line(_COLUMNS), rule, *(line(row) for row in rows)])


def user_source_line(stack_trace: str | None) -> str | None:
    """The innermost user frame of a ``stack_trace`` as ``file:line in fn: code``, or ``None``."""
    if not stack_trace:
        return None
    frames = list(_FRAME.finditer(stack_trace))
    if not frames:
        lines = [text.strip() for text in stack_trace.splitlines() if text.strip()]
        return lines[-1] if lines else None
    last = frames[-1]
    return f"{last['file']}:{last['line']} in {last['fn']}: {last['code'].strip()}"


def format_example_value(value: Any) -> str | None:
    """``float32[2, 3]`` for a tensor, a tuple of those for a tuple; ``None`` when there is nothing to say."""
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}[{', '.join(str(size) for size in value.shape)}]"
    if isinstance(value, tuple | list) and value:
        parts = [format_example_value(item) or type(item).__name__ for item in value]
        return "(" + ", ".join(parts) + ")"
    return None


def format_readable(gm: torch.fx.GraphModule) -> str:
    """``gm``'s generated code with, above each node, a comment naming the user's source line it came from.

    Consecutive nodes from the same source line share one comment; each
    node's line ends with the shape and dtype of its example value.
    """
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError(f"format_readable takes a torch.fx.GraphModule, got {type(gm).__name__}")
    nodes = line_node_map(gm)
    out: list[str] = []
    last_comment: str | None = None
    for lineno, text in enumerate(gm.code.splitlines(), start=1):
        if not text.strip():
            continue
        node = nodes.get(lineno)
        if node is None or node.op == "output":
            out.append(text.rstrip())
            continue
        indent = text[: len(text) - len(text.lstrip())]
        comment = user_source_line(node.meta.get(STACK_TRACE)) or "(generated: no user source line)"
        if comment != last_comment:
            out.append(f"{indent}# {comment}")
            last_comment = comment
        shape = format_example_value(node.meta.get(EXAMPLE_VALUE))
        out.append(text.rstrip() + (f"  # {shape}" if shape else ""))
    return "\n".join(out)
