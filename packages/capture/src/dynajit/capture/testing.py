"""Backends for tests: count the graphs and operations a compilation produces."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["CompileCounter", "CompileCounterWithBackend", "count_ops"]

_OP_KINDS = frozenset({"call_function", "call_method", "call_module"})


def count_ops(gm: torch.fx.GraphModule) -> int:
    """The number of call_function, call_method and call_module nodes of ``gm``'s graph."""
    return sum(node.op in _OP_KINDS for node in gm.graph.nodes)


class CompileCounter:
    """A backend that counts what it compiles and runs each graph as-is.

    Attributes:
        frame_count: graphs compiled (one per call of the backend).
        op_count: operation nodes (call_function / call_method / call_module) over all those graphs.
        graphs: the graph modules, in compilation order.
    """

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        self.frame_count += 1
        self.op_count += count_ops(gm)
        self.graphs.append(gm)
        return gm.forward

    def clear(self) -> None:
        """Forget everything counted so far."""
        self.frame_count = 0
        self.op_count = 0
        self.graphs.clear()

    def __repr__(self) -> str:
        return f"CompileCounter(frame_count={self.frame_count}, op_count={self.op_count})"


class CompileCounterWithBackend(CompileCounter):
    """A :class:`CompileCounter` that hands each graph on to a real backend and returns what that compiled."""

    def __init__(self, backend: Callable[..., Any]) -> None:
        super().__init__()
        if not callable(backend):
            raise TypeError(f"CompileCounterWithBackend expects a backend callable, got {backend!r}")
        self.backend = backend

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        super().__call__(gm, example_inputs)
        return self.backend(gm, example_inputs)
