"""Views of intermediates that survive a real layout the fake tensors did not predict.

A graph is traced on fake tensors, whose layouts follow torch's meta functions. For a few kernels the real
layout depends on strides of size-1 dims that symbolic fakes do not carry: a one-channel ``conv1d`` of a
transposed input comes back channels-last from oneDNN where its fake is contiguous. A ``view`` that a
decomposed ``reshape`` or ``matmul`` put after it was valid on the fake and raises on the real tensor, where
eager's ``reshape`` copies. Inside a functional graph a copy of an intermediate is indistinguishable from a
view of it, so such views copy when the real tensor cannot be viewed. A forward's views of its inputs keep
their meaning: their layout is the caller's, the same in eager. A backward's inputs are saved intermediates.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Sequence
from typing import Any

import torch
import torch.fx

__all__ = ["input_view_chain", "view_or_copy", "viewing_real_layouts"]

aten = torch.ops.aten


def view_or_copy(tensor: torch.Tensor, shape: Sequence[Any]) -> torch.Tensor:
    """``tensor.view(shape)``, or a copy in that shape when the real layout cannot be viewed so."""
    try:
        return aten.view.default(tensor, shape)
    except RuntimeError:
        return aten.reshape.default(tensor, shape)


def _unsafe_view_or_copy(tensor: torch.Tensor, shape: Sequence[Any]) -> torch.Tensor:
    """``view_or_copy`` of an ``_unsafe_view``, whose result is no view: eager's ``matmul`` returns one (``linear`` of
    a 3-d input), which ``detach_()`` and in-place writes under autograd treat unlike a view."""
    try:
        return aten._unsafe_view.default(tensor, shape)
    except RuntimeError:
        return aten.reshape.default(tensor, shape)


# Each reshaping view and what a graph calls in its place.
_RESHAPING_VIEWS = {aten.view.default: view_or_copy, aten._unsafe_view.default: _unsafe_view_or_copy}


def viewing_real_layouts(compiler: Callable[..., Any], *, inputs_are_callers: bool = True) -> Callable[..., Any]:
    """Wrap an AOT autograd graph compiler so the graph's views of intermediates copy when they must.

    ``inputs_are_callers=False`` (a backward) treats the graph's inputs as intermediates too.
    """

    def compile_graph(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        changed = False
        for node in graph_module.graph.nodes:
            if (
                node.op == "call_function"
                and node.target in _RESHAPING_VIEWS
                and not (inputs_are_callers and _of_input(node.args[0]))
            ):
                node.target = _RESHAPING_VIEWS[node.target]
                changed = True
        if changed:
            graph_module.recompile()
        return compiler(graph_module, example_inputs)

    return compile_graph


def _of_input(node: Any) -> bool:
    """Whether ``node`` is a graph input or a chain of views of one."""
    return input_view_chain(node) is not None


def _is_view_op(node: Any) -> bool:
    target = getattr(node, "target", None)
    return isinstance(target, torch._ops.OpOverload) and target.is_view and bool(node.args)


def input_view_chain(
    node: Any, roots: Collection[torch.fx.Node] = ()
) -> tuple[torch.fx.Node, list[torch.fx.Node]] | None:
    """The graph input ``node`` views and the aten view nodes that make it from that input, the input's first
    (none for the input itself; a piece of a ``split`` is the split and its ``getitem``), or None when ``node``
    is not a chain of views of an input. With ``roots``, the chain also ends at the first of those nodes it
    reaches (an input's new value, which stands for the input)."""
    chain = []
    while isinstance(node, torch.fx.Node) and node.op == "call_function" and node not in roots:
        if node.target is operator.getitem and _is_view_op(node.args[0]) and isinstance(node.args[1], int):
            chain.append(node)  # one piece of a view op returning several (`split`, `unbind`)
            node = node.args[0]
        if not _is_view_op(node):
            return None
        chain.append(node)
        node = node.args[0]
    if not (isinstance(node, torch.fx.Node) and (node.op == "placeholder" or node in roots)):
        return None
    return node, chain[::-1]
