"""Splitting a training graph into forward and backward: the min-cut partitioner, minus its one unsafe choice.

AOT autograd's min-cut partitioner saves fewer activations by recomputing cheap ones in the backward,
and it treats the forward's inputs as values that cannot change. For an input the graph writes into
(``x.mul_(w)`` on an activation or a buffer) that is wrong: AOT autograd copies the written value
into the caller's tensor after the forward, so a backward recomputing ``clone(x)`` from the saved
input reads the written value, and autograd refuses it ("modified by an inplace operation") where
eager, which saved the value before the write, computes the gradient. :func:`partition` saves such
clones in the forward instead: the copy eager makes, made at the same point.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.fx
from functorch.compile import min_cut_rematerialization_partition

__all__ = ["partition"]

aten = torch.ops.aten


def partition(
    joint: torch.fx.GraphModule, joint_inputs: Any, *, num_fwd_outputs: int, **options: Any
) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """The min-cut split of ``joint``, with each saved input the backward only clones saved as that clone."""
    forward, backward = min_cut_rematerialization_partition(
        joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **options
    )
    cloned = {
        node.args[0].name
        for node in backward.graph.nodes
        if node.target is aten.clone.default and getattr(node.args[0], "op", None) == "placeholder"
    }
    if not cloned:
        return forward, backward
    output = forward.graph.output_node()
    results = list(output.args[0])
    placeholders = [n for n in forward.graph.nodes if n.op == "placeholder"]
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for i in range(num_fwd_outputs, len(results)):
        saved = results[i]
        if not isinstance(saved, torch.fx.Node) or saved.op != "placeholder" or saved.name not in cloned:
            continue
        if saved not in copies:
            with forward.graph.inserting_after(placeholders[-1]):
                copies[saved] = forward.graph.call_function(aten.clone.default, (saved,))
            value = saved.meta.get("val")
            if isinstance(value, torch.Tensor):
                with getattr(value, "fake_mode", None) or contextlib.nullcontext():
                    copies[saved].meta["val"] = aten.clone.default(value)
        results[i] = copies[saved]
    if copies:
        output.args = (tuple(results),)
        forward.recompile()
        # The backward now receives the copy: its placeholder says so (a clone of a strided input is dense).
        saved_copies = {saved.name: copy for saved, copy in copies.items()}
        for node in backward.graph.nodes:
            if node.op == "placeholder" and node.name in saved_copies and "val" in saved_copies[node.name].meta:
                node.meta["val"] = saved_copies[node.name].meta["val"]
    return forward, backward
