"""Inference graphs called without AOT autograd's runtime wrapper, where that wrapper would change nothing.

AOT autograd wraps every compiled graph in a runtime wrapper that writes the new values of mutated inputs back,
regenerates outputs that alias an input or each other, turns grad mode off and autocast off. For an inference
graph of plain tensors that needs none of it (no input is written, no output is a view or shares memory with
anything, autocast off) the wrapper costs about two microseconds a call, more than the
kernels of a small graph: such a graph is called straight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils import _pytree as pytree

__all__ = ["PLAIN_TENSORS", "direct_inference", "fresh_outputs", "grad_off_caller"]

PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def direct_inference(
    graph: torch.fx.GraphModule, compiled: Callable[[list[Any]], Any], example_inputs: Sequence[Any], outer: Any
) -> Callable[..., Any] | None:
    """A call of ``compiled`` (the boxed compile of AOT autograd's inference ``graph``, traced from the graph
    ``outer`` on ``example_inputs``) that skips AOT autograd's runtime wrapper, or None where that wrapper acts.

    AOT autograd gives the inference graph one more input per token or seed it threads through and one more
    output per input it writes or base of an aliased output: the same counts as ``outer`` rule those out.
    """
    if torch._C._is_any_autocast_enabled():
        return None
    if not all(type(a) in PLAIN_TENSORS for a in example_inputs):
        return None
    placeholders = [n.meta.get("val") for n in graph.graph.nodes if n.op == "placeholder"]
    outputs = [n.meta.get("val") if isinstance(n, torch.fx.Node) else n for n in _outputs(graph)]
    if len(placeholders) != len(example_inputs) or len(outputs) != len(_outputs(outer)):
        return None
    if not fresh_outputs(placeholders, outputs):
        return None

    return grad_off_caller(compiled)


def grad_off_caller(compiled: Callable[[list[Any]], Any], state: Sequence[Any] = ()) -> Callable[..., Any]:
    """Call boxed ``compiled`` on ``state`` then the arguments, with grad mode off for the call."""

    def run(*args: Any) -> Any:
        if not torch.is_grad_enabled():
            return compiled([*state, *args])
        # (as AOT autograd's wrapper: an inference graph's aten ops record no history, whoever calls it)
        torch._C._set_grad_enabled(False)
        try:
            return compiled([*state, *args])
        finally:
            torch._C._set_grad_enabled(True)

    return run


def fresh_outputs(inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    """Whether a graph's recorded ``inputs`` and ``outputs`` are tensors, and each output a new tensor: not a view,
    not requiring grad, and sharing memory with no input and no other output."""
    if not all(isinstance(v, torch.Tensor) for v in (*inputs, *outputs)):
        return False
    seen = {v.untyped_storage()._cdata for v in inputs}
    for value in outputs:
        if value._is_view() or value.requires_grad or value.untyped_storage()._cdata in seen:
            return False
        seen.add(value.untyped_storage()._cdata)
    return True


def _outputs(gm: torch.fx.GraphModule) -> list[Any]:
    return pytree.tree_leaves(gm.graph.output_node().args[0])
