"""Backward formulas traced on fake tensors, made to compute what eager's CPU branch of the same formula does.

Some of autograd's formulas branch on the tensor: ``max()`` and ``min()`` of a whole tensor spread the gradient
over the elements equal to the result with ``zeros.masked_fill_(mask, grad / count)`` on CPU, and with
``mask * (grad / count)`` for a tensor subclass, which a fake tensor is. The two differ when the gradient is
not finite: the product puts NaN on every element (``0 * nan``), eager only on the maxima. Traced, the product
is rewritten to eager's ``where(mask, grad / count, 0)``.

``prod`` branches on the data: on CPU its gradient is ``grad * result / x`` when ``x`` holds no zero, and the
product of the other elements otherwise (zeros for a whole-tensor product with two zeros), while a fake tensor
always takes the product of the others. The two differ beside an infinity or a NaN (``inf / inf`` against
``1``): :data:`EAGER_BRANCH_KERNELS` are Python kernels for the Autograd key that record eager's choice as a
``where`` over both branches, for a backend to trace with (``python_kernels_replaced``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

import torch
import torch.fx

__all__ = ["EAGER_BRANCH_KERNELS", "matching_eager_backward_formulas", "rewrite_spread_gradients"]

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


def _product_of_others(grad: torch.Tensor, x: torch.Tensor, dim: int) -> torch.Tensor:
    """``grad`` times each element's product of the others along ``dim``: exclusive cumulative products from both
    ends, exact beside zeros (autograd's ``prod_safe_zeros_backward``)."""
    if x.numel() == 0:
        return grad.expand_as(x)
    n = x.size(dim)
    if n == 1:
        return grad
    ones = torch.ones_like(x.narrow(dim, 0, 1))
    before = torch.cat([ones, x.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    after = torch.cat([ones, x.narrow(dim, 1, n - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return grad * (before * after).conj()


class _EagerProd(torch.autograd.Function):
    """``prod`` whose backward takes the branch eager's CPU formula takes for the same data."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, dim: int | None, keepdim: bool, dtype: torch.dtype | None) -> torch.Tensor:
        result = aten.prod.default(x, dtype=dtype) if dim is None else aten.prod.dim_int(x, dim, keepdim, dtype=dtype)
        ctx.save_for_backward(x, result)
        ctx.dim, ctx.keepdim = dim, keepdim
        return result

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        x, result = ctx.saved_tensors
        x = x.to(grad.dtype)
        if x.dim() == 0:
            return grad, None, None, None
        zeros = (x == 0).sum()
        if ctx.dim is None:
            others = _product_of_others(grad, x.reshape(-1), 0).view_as(x)
            with_zeros = torch.where(zeros > 1, 0.0, others)  # eager's zeros_like for two zeros or more
        else:
            dim = ctx.dim % x.dim()
            if not ctx.keepdim:
                grad, result = grad.unsqueeze(dim), result.unsqueeze(dim)
            with_zeros = _product_of_others(grad, x, dim)
        return torch.where(zeros == 0, grad * (result / x).conj(), with_zeros), None, None, None


def _prod_kernel(overload: Any, with_dim: bool) -> Callable[..., Any]:
    def run(x: torch.Tensor, *args: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
        if not (torch.is_grad_enabled() and x.requires_grad):
            with torch._C._AutoDispatchBelowAutograd():
                return overload(x, *args, dtype=dtype)
        dim, keepdim = (args[0], args[1] if len(args) > 1 else False) if with_dim else (None, False)
        return _EagerProd.apply(x, dim, keepdim, dtype)

    return run


# Python kernels for the Autograd key whose backward takes eager's data-dependent branch (see the module).
EAGER_BRANCH_KERNELS: dict[Any, Callable[..., Any]] = {
    aten.prod.default: _prod_kernel(aten.prod.default, with_dim=False),
    aten.prod.dim_int: _prod_kernel(aten.prod.dim_int, with_dim=True),
}
