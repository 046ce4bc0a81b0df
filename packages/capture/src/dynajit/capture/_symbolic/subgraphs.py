"""Functions traced into graphs of their own, for higher-order ops (``torch.cond``'s two branches).

While a branch is traced the output graph records into a fresh builder whose
placeholders are the branch's operands. A tensor of the enclosing graph that
the branch reads (a module's weight, a tensor of the frame, one computed
before the call) is lifted: it becomes one more placeholder of the subgraph
and one more operand of the op. Both branches of one op take the same
operands in the same order, so lifting is shared between them and each
subgraph gets a placeholder for every lifted tensor, used or not.

A branch must be a function of its operands: a Python side effect or a
nested higher-order op inside it is a graph break (the whole call then runs
in Python, where torch runs it its own way).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.fx

from dynajit.capture._symbolic.variables import TensorVar, unsupported
from dynajit.fxgraph import GraphBuilder

if TYPE_CHECKING:
    from dynajit.capture._symbolic.output import OutputGraph

__all__ = ["Subgraph", "trace_subgraph"]


class Subgraph:
    """One branch's graph while it is traced: its builder, operand placeholders and lifted placeholders."""

    def __init__(self, output: OutputGraph, lifts: list[torch.fx.Node], name: str) -> None:
        self.output = output
        self.parent = output.builder
        self.builder = GraphBuilder(output.fake_mode)
        self.lifts = lifts
        self.name = name
        self.operands: list[torch.fx.Node] = []
        self.lifted: dict[torch.fx.Node, torch.fx.Node] = {}

    def _placeholder(self, name: str, example: torch.Tensor) -> torch.fx.Node:
        """A placeholder with ``example``'s metadata in a fake storage of its own (a branch must not write
        into its operands')."""
        with self.output.fake_mode, torch.inference_mode(example.is_inference()):  # as symbolic_fake
            fresh = torch.empty_strided(
                example.shape, example.stride(), dtype=example.dtype, device=example.device,
                requires_grad=example.requires_grad,
            )  # fmt: skip
        return self.builder.placeholder(name, example_value=fresh)

    def operand(self, example: torch.Tensor, index: int) -> TensorVar:
        """The branch's ``index``-th operand."""
        node = self._placeholder(f"operand_{index}", example)
        self.operands.append(node)
        return TensorVar(node, node.meta["example_value"])

    def lift(self, node: torch.fx.Node) -> torch.fx.Node:
        """The placeholder standing for the enclosing graph's ``node`` (made on first use)."""
        found = self.lifted.get(node)
        if found is not None:
            return found
        if node.graph is not self.parent.graph:
            unsupported("torch.cond inside a torch.cond branch (a nested higher-order op) is not traced")
        example = node.meta.get("example_value")
        if not isinstance(example, torch.Tensor):
            unsupported(f"a torch.cond branch reads {type(example).__name__} {node.name} of the enclosing graph")
        placeholder = self._placeholder(f"lifted_{node.name}", example)
        self.lifted[node] = placeholder
        if node not in self.lifts:
            self.lifts.append(node)
        return placeholder

    def finish(self, outputs: list[torch.fx.Node]) -> torch.fx.GraphModule:
        """The branch's GraphModule: placeholders ordered operands first, then every lifted node's, then the rest."""
        for node in self.lifts:
            self.lift(node)
        ordered = [*self.operands, *(self.lifted[n] for n in self.lifts)]
        graph = self.builder.graph
        if ordered:
            first = next(iter(graph.nodes))
            if first is not ordered[0]:
                first.prepend(ordered[0])
            for before, after in itertools.pairwise(ordered):
                before.append(after)
        self.builder.output(tuple(outputs))
        try:
            return self.builder.build(class_name=self.name)
        except Exception as exc:  # a node of the enclosing graph reached the branch's without being lifted
            unsupported(f"a torch.cond branch could not be made a graph of its own ({type(exc).__name__}: {exc})")


@contextlib.contextmanager
def trace_subgraph(output: OutputGraph, sub: Subgraph) -> Iterator[None]:
    """Record into ``sub``'s graph inside the block; a Python side effect there is a graph break."""
    if output.subgraph is not None:
        unsupported("torch.cond inside a torch.cond branch (a nested higher-order op) is not traced")
    effects = output.side_effects.writes
    output.builder, output.subgraph = sub.builder, sub
    try:
        yield
    finally:
        output.builder, output.subgraph = sub.parent, None
    if output.side_effects.writes != effects:
        unsupported("a torch.cond branch has a Python side effect (it must be a function of its operands)")


def lifted_proxy(output: OutputGraph, node: Any) -> Any:
    """``node`` as the graph being recorded sees it: lifted when it belongs to an enclosing graph."""
    sub = output.subgraph
    if sub is None or not isinstance(node, torch.fx.Node) or node.graph is sub.builder.graph:
        return node
    return sub.lift(node)
