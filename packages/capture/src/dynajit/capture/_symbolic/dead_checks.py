"""Unused results whose ops check their integer operands' values: kept as extra graph outputs, then dropped.

``x[idx]`` whose result the program never reads raises in eager when ``idx`` holds an index out of range, and so
does ``i // j`` for a zero in ``j`` or ``y[idx] = v`` into a temporary: those checks depend on the values, which
no trace sees. Every backend drops an unused result as dead code, and the compiled program returned where eager
raised. So the graph also returns each unused result computed from an integer tensor (an index, a divisor), or
the temporary such an op wrote into, and the caller gets only the outputs the program has: the op runs, and its
kernel or the backend's bounds check raises. Such a result is returned detached, so no gradient flows from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree

from dynajit.fxgraph import mutates

__all__ = ["first_outputs", "unused_value_checks"]


def _reads_integer_tensor(node: torch.fx.Node) -> bool:
    for arg in pytree.tree_leaves((node.args, node.kwargs)):
        value = arg.meta.get("example_value") if isinstance(arg, torch.fx.Node) else None
        if isinstance(value, torch.Tensor) and not (value.is_floating_point() or value.is_complex()):
            if value.dtype != torch.bool:
                return True
    return False


def unused_value_checks(graph: torch.fx.Graph, outputs: Sequence[torch.fx.Node]) -> list[torch.fx.Node]:
    """The nodes to return besides ``outputs``: unused results of ops reading an integer tensor, and the
    temporaries (not inputs, not outputs, read by nothing later) such an op wrote into in place."""
    kept = set(outputs)
    extras: list[torch.fx.Node] = []
    order = {node: position for position, node in enumerate(graph.nodes)}
    for node in graph.nodes:
        if node.op not in ("call_function", "call_method") or not _reads_integer_tensor(node):
            continue
        target = node
        if mutates(node) and node.args and isinstance(node.args[0], torch.fx.Node):
            target = node.args[0]
            if target.op not in ("call_function", "call_method") or any(order[u] > order[node] for u in target.users):
                continue  # a write into an input or a module's buffer is the graph's effect; one read later is used
        elif node.users:
            continue
        value = target.meta.get("example_value")
        if target in kept or not isinstance(value, torch.Tensor) or value._is_view():
            continue
        kept.add(target)
        extras.append(_detached(graph, target, value) if value.requires_grad else target)
    return extras


def _detached(graph: torch.fx.Graph, node: torch.fx.Node, value: torch.Tensor) -> torch.fx.Node:
    """``node``'s value detached: returned for its checks alone, it must take no part in a backward, where its zero
    gradient times a NaN local derivative (``sqrt`` of a negative) made the inputs' gradients NaN."""
    with graph.inserting_after(node):
        detached = graph.call_method("detach", (node,))
    detached.meta["example_value"] = value.detach()
    return detached


def first_outputs(compiled: Callable[..., Any], count: int) -> Callable[..., Any]:
    """``compiled`` returning only its first ``count`` results (the extra ones are computed, then dropped)."""

    def run(*args: Any) -> Any:
        return compiled(*args)[:count]

    return run
