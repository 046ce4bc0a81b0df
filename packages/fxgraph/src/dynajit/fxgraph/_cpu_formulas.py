"""Backward formulas traced on fake tensors, made to compute what eager's CPU branch of the same formula does.

Some of autograd's formulas branch on the tensor: ``max()`` and ``min()`` of a whole tensor spread the gradient
over the elements equal to the result with ``zeros.masked_fill_(mask, grad / count)`` on CPU, and with
``mask * (grad / count)`` for a tensor subclass, which a fake tensor is. The two differ when the gradient is
not finite: the product puts NaN on every element (``0 * nan``), eager only on the maxima. Traced, the product
is rewritten to eager's ``where(mask, grad / count, 0)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

import torch
import torch.fx

__all__ = ["matching_eager_backward_formulas", "rewrite_spread_gradients"]

aten = torch.ops.aten


def _is_call(node: Any, target: Any) -> TypeGuard[torch.fx.Node]:
    return isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is target


def _equal_or_both_nan(mask: Any) -> bool:
    """``(x == v) | (isnan(x) & isnan(v))``: the mask of the elements equal to a reduction's result."""
    if not _is_call(mask, aten.logical_or.default):
        return False
    equal, both_nan = mask.args
    return (
        _is_call(equal, aten.eq.Tensor)
        and _is_call(both_nan, aten.logical_and.default)
        and all(_is_call(a, aten.isnan.default) for a in both_nan.args)
    )


def _spread_gradient(node: torch.fx.Node) -> bool:
    """``mask * (grad / mask.sum())`` of the subclass branch of ``evenly_distribute_backward``."""
    if node.target is not aten.mul.Tensor or len(node.args) != 2:
        return False
    mask, share = node.args
    if not (_equal_or_both_nan(mask) and _is_call(share, aten.div.Tensor)):
        return False
    count: Any = share.args[1]
    whole = _is_call(count, aten.sum.default) or (_is_call(count, aten.sum.dim_IntList) and not count.args[1])
    return bool(whole and count.args[0] is mask)


def rewrite_spread_gradients(gm: torch.fx.GraphModule) -> bool:
    """Rewrite each ``mask * share`` of a spread gradient into ``where(mask, share, 0)``; True if any was.

    Works on a backward graph, or on a joint graph before it is split (a partitioner may move the mask into
    the forward, where the backward no longer shows it).
    """
    changed = False
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and _spread_gradient(node):
            mask, share = node.args
            node.target = aten.where.ScalarOther
            node.args = (mask, share, 0.0)
            changed = True
    if changed:
        gm.recompile()
    return changed


def matching_eager_backward_formulas(bw_compiler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an AOT autograd backward compiler so its graph computes eager's CPU formulas (see the module)."""

    def compile_backward(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        rewrite_spread_gradients(gm)
        return bw_compiler(gm, example_inputs)

    return compile_backward
