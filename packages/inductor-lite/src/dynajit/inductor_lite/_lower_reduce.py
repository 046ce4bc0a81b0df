"""Lowerings of reductions: sum, mean, prod, amax/amin, max/min, argmax/argmin, any/all, var, var_mean, and
layer norm, built on var_mean.

A reduction is a ComputedBuffer over the kept dims whose ``fn(index, rindex)`` reads the input at
the merged index. Its accumulator dtype is float32 for 16-bit floats and int64 for integer sums;
mean and var are built from sums plus pointwise arithmetic on the (per-row) results. A symbolic
element count is read at run time (the kernel's shape arguments); means and variances divide by
the count, as eager does.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._index import Index
from dynajit.inductor_lite._ir import Expr, TensorValue, const, contiguous_strides, op, opmath_dtype, size_value
from dynajit.inductor_lite._lowering import lowering
from dynajit.inductor_lite._strides import dense_strides

__all__: list[str] = []

aten = torch.ops.aten


def _dims(x: TensorValue, dims: Any) -> list[int]:
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(len(x.size)))
    if isinstance(dims, int):
        dims = [dims]
    n = max(len(x.size), 1)
    return sorted({d % n for d in dims}) if x.size else []


def _acc_dtype(rtype: str, dtype: torch.dtype) -> torch.dtype:
    if rtype in ("any", "all"):
        return torch.bool
    if dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    if rtype in ("sum", "prod") and not dtype.is_floating_point:
        return torch.int64
    return dtype


def reduce(
    ctx: Any,
    x: TensorValue,
    dims: Any,
    keepdim: bool,
    rtype: str,
    *,
    value_dtype: torch.dtype | None = None,
    transform: Any = None,
) -> TensorValue:
    """Realize a reduction of ``x`` over ``dims``; the result keeps the accumulator dtype."""
    rdims = _dims(x, dims)
    kept = [d for d in range(len(x.size)) if d not in rdims]
    red_ranges = tuple(x.size[d] for d in rdims)
    out_size = (
        tuple(1 if d in rdims else s for d, s in enumerate(x.size)) if keepdim else tuple(x.size[d] for d in kept)
    )
    value_dtype = value_dtype or x.dtype
    acc = _acc_dtype(rtype, value_dtype)
    if rtype in ("argmax", "argmin"):
        acc = opmath_dtype(value_dtype)

    def fn(index: Sequence[Index], rindex: Sequence[Index]) -> Expr:
        full: list[Index] = [Index()] * len(x.size)
        kept_idx = [index[d] for d in kept] if keepdim else list(index)
        for d, i in zip(kept, kept_idx):
            full[d] = i
        for d, r in zip(rdims, rindex):
            full[d] = r
        value = x.loader(full)
        if transform is not None:
            value = transform(value, index)
        return op("cast", acc, value)

    out_dtype = torch.int64 if rtype in ("argmax", "argmin") else acc
    return ctx.reduction(out_size, red_ranges, rtype, fn, out_dtype)


class Per:
    """A symbolic element count ``n`` a mean or variance divides by."""

    def __init__(self, n: Any) -> None:
        self.n = n


def count_of(n: Any) -> float | Per:
    """The element count ``n`` a mean divides by: a constant, or a :class:`Per` read in the kernel when symbolic.

    Means and variances divide by it, as eager does: multiplying by ``1 / n`` rounds differently, and a
    contracted ``x - total * (1 / n)`` leaves a variance of equal values above zero.
    """
    if not _sym.is_symbolic(n):
        return float(n)
    if not _sym.provably_lt(0, n):
        raise _sym.Unsupported(f"element count {n} may be zero")
    return Per(n)


def divided(v: Expr, count: float | Per, dtype: torch.dtype) -> Expr:
    """``v / count`` in ``dtype`` (a count of 0 gives eager's inf or NaN)."""
    divisor = size_value(count.n, dtype) if isinstance(count, Per) else const(count, dtype)
    return op("truediv", dtype, v, divisor)


def _finish(ctx: Any, value: TensorValue, count: float | Per | None = None) -> TensorValue:
    """Pointwise epilogue: optional division by an element count, then the node's dtype."""
    dtype = ctx.current_val().dtype

    def loader(idx: Sequence[Index]) -> Expr:
        v = value.loader(idx)
        if count is not None:
            v = divided(v, count, v.dtype)
        return op("cast", dtype, v)

    if count is None and dtype == value.dtype:
        return value
    return TensorValue(value.size, dtype, loader, value.device, cost=1)


def _count(x: TensorValue, dims: Any) -> Any:
    return _sym.prod(x.size[d] for d in _dims(x, dims))


@lowering(aten.sum.dim_IntList, aten.sum.default, aten.prod.dim_int, aten.prod.default)
def _sum(ctx: Any, x: TensorValue, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorValue:
    rtype = "sum" if ctx.current_node.target in (aten.sum.dim_IntList, aten.sum.default) else "prod"
    if isinstance(dims, bool):
        dims, keepdim = None, dims
    out = ctx.current_val().dtype
    return _finish(ctx, reduce(ctx, x, dims, keepdim, rtype, value_dtype=out if dtype is not None else x.dtype))


@lowering(aten.mean.dim, aten.mean.default)
def _mean(ctx: Any, x: TensorValue, dims: Any = None, keepdim: bool = False, *, dtype: Any = None) -> TensorValue:
    n = _count(x, dims)
    total = reduce(ctx, x, dims, keepdim, "sum", value_dtype=ctx.current_val().dtype)
    return _finish(ctx, total, count_of(n))


@lowering(aten.amax, aten.amin, aten.max.default, aten.min.default)
def _amax(ctx: Any, x: TensorValue, dims: Any = None, keepdim: bool = False) -> TensorValue:
    target = ctx.current_node.target
    rtype = "max" if target in (aten.amax.default, aten.max.default) else "min"
    return _finish(ctx, reduce(ctx, x, dims, keepdim, rtype))


@lowering(aten.argmax, aten.argmin)
def _argmax(ctx: Any, x: TensorValue, dim: Any = None, keepdim: bool = False) -> TensorValue:
    rtype = "argmax" if ctx.current_node.target is aten.argmax.default else "argmin"
    if dim is None and keepdim:
        return ctx.fallback()
    return reduce(ctx, x, dim, keepdim, rtype)


@lowering(aten.max.dim, aten.min.dim)
def _max_dim(ctx: Any, x: TensorValue, dim: int, keepdim: bool = False) -> tuple[TensorValue, TensorValue]:
    is_max = ctx.current_node.target is aten.max.dim
    values = reduce(ctx, x, dim, keepdim, "max" if is_max else "min")
    indices = reduce(ctx, x, dim, keepdim, "argmax" if is_max else "argmin")
    return ctx.cast_value(values, x.dtype), indices


@lowering(aten.any.dim, aten.any.dims, aten.any.default, aten.all.dim, aten.all.dims, aten.all.default)
def _any_all(ctx: Any, x: TensorValue, dims: Any = None, keepdim: bool = False) -> TensorValue:
    rtype = "any" if "any" in str(ctx.current_node.target) else "all"
    return _finish(ctx, reduce(ctx, x, dims, keepdim, rtype))


def _var(
    ctx: Any,
    x: TensorValue,
    dims: Any,
    correction: Any,
    keepdim: bool,
    dtypes: tuple[torch.dtype, torch.dtype] | None = None,
) -> tuple[TensorValue, TensorValue]:
    """The variance and the mean of ``x`` over ``dims``, in ``dtypes`` (the current node's results' by default)."""
    var_dtype, mean_dtype = dtypes or (ctx.current_val_at(0).dtype, ctx.current_val_at(1).dtype)
    n = _count(x, dims)
    correction = 1 if correction is None else correction
    if _sym.is_symbolic(n):
        if float(correction) != int(correction):
            raise _sym.Unsupported(f"variance with a fractional correction {correction} over {n} elements")
        correction = int(correction)  # sizes stay integer expressions
    acc_in = x.dtype if x.dtype.is_floating_point else torch.float32
    total = reduce(ctx, x, dims, True, "sum", value_dtype=acc_in)
    acc = total.dtype
    per_n = count_of(n)

    def deviation(value: Expr, index: Sequence[Index]) -> Expr:
        kept_index = list(index) if keepdim else _expand_index(x, dims, index)
        mean = divided(total.loader(kept_index), per_n, acc)
        return op("sub", acc, op("cast", acc, value), mean)

    def deviation_sq(value: Expr, index: Sequence[Index]) -> Expr:
        d = deviation(value, index)
        return op("mul", acc, d, d)

    sq = reduce(ctx, x, dims, keepdim, "sum", value_dtype=acc_in, transform=deviation_sq)
    drift = reduce(ctx, x, dims, keepdim, "sum", value_dtype=acc_in, transform=deviation)
    denom = max(n - correction, 0) if isinstance(n, int) else _sym.norm(n - correction)
    var = _per_count(_corrected(sq, drift, per_n), count_of(denom), var_dtype)
    mean = _refined_mean(_reshape_keep(total, sq.size), drift, per_n, mean_dtype)
    return var, mean


def _corrected(sq: TensorValue, drift: TensorValue, per_n: float | Per) -> TensorValue:
    """``sq - drift**2 / n``: the corrected two-pass sum of squares.

    The rounded mean of ``n`` equal values can miss them by an ulp, leaving the plain sum of squared
    deviations above zero where eager's Welford update gives exactly 0 -- and a standard deviation's
    gradient at 0 is masked to 0 in eager but O(1) just above it. Every deviation from a rounded mean
    of equal values is the same number, so the correction cancels the sum exactly; elsewhere it removes
    the mean's rounding error. The clamp keeps rounding from going below zero, which eager never does.
    """

    def loader(idx: Sequence[Index]) -> Expr:
        s, d = sq.loader(idx), drift.loader(idx)
        fixed = op("sub", s.dtype, s, divided(op("mul", s.dtype, d, d), per_n, s.dtype))
        # (a sum of squares that overflowed stays inf, as eager's: the correction would make it inf - inf)
        return op("where", s.dtype, op("isinf", torch.bool, s), s, op("maximum", s.dtype, fixed, const(0.0, s.dtype)))

    return TensorValue(sq.size, sq.dtype, loader, sq.device, cost=1)


def _refined_mean(total: TensorValue, drift: TensorValue, per_n: float | Per, dtype: torch.dtype) -> TensorValue:
    """``m + drift / n`` for ``m = total / n``: the mean the deviations were taken from, refined by their sum.

    Eager's variance kernels (and batch norm's statistics) accumulate in double or by Welford's update, so the
    mean of equal values is exactly that value; a float sum of them over ``n`` can miss it by an ulp, and batch
    norm's ``(x - mean) * rsqrt(var + eps)`` magnifies that miss by ``1 / sqrt(eps)`` where eager's is 0. The
    deviations from ``m`` are then one number, and ``m`` plus it is the value again; elsewhere the step removes
    ``m``'s rounding error. A mean that is not finite (an input holding inf or NaN) is kept as it is.
    """

    def loader(idx: Sequence[Index]) -> Expr:
        acc = total.dtype
        m = divided(total.loader(idx), per_n, acc)
        refined = op("add", acc, m, divided(drift.loader(idx), per_n, acc))
        kept = op("logical_or", torch.bool, op("isinf", torch.bool, m), op("isnan", torch.bool, m))
        return op("cast", dtype, op("where", acc, kept, m, refined))

    return TensorValue(drift.size, dtype, loader, drift.device, cost=1)


def _mean_in_order(ctx: Any, x: TensorValue, dims: Any, keepdim: bool, mean: TensorValue) -> TensorValue:
    """``mean`` where eager's ``var_mean`` reads its slice in order, by Welford's update ``m += (v - m) / k``.

    Once ``m`` is infinite, the next element makes it NaN (``inf - inf``, or ``inf + -inf / k``), so eager's
    mean is infinite only where one element is, and that element is the slice's last: the last index along
    every reduced dim, whatever the strides and however the kernel splits the slice among threads. A sum's
    mean is infinite wherever an element is; this makes it NaN elsewhere.
    """
    infinities = reduce(ctx, x, dims, keepdim, "sum", value_dtype=torch.int64, transform=_is_infinite)
    rdims = _dims(x, dims)

    def loader(idx: Sequence[Index]) -> Expr:
        m = mean.loader(idx)
        full = list(idx) if keepdim else _expand_index(x, dims, idx)
        last = x.loader([Index.of(x.size[d] - 1) if d in rdims else i for d, i in enumerate(full)])
        lone_last = op(
            "logical_and",
            torch.bool,
            op("eq", torch.bool, infinities.loader(idx), const(1, torch.int64)),
            op("isinf", torch.bool, last),
        )
        reached = op("logical_or", torch.bool, op("logical_not", torch.bool, op("isinf", torch.bool, m)), lone_last)
        return op("where", m.dtype, reached, m, const(float("nan"), m.dtype))

    return TensorValue(mean.size, mean.dtype, loader, mean.device, cost=2)


def _is_infinite(value: Expr, index: Sequence[Index]) -> Expr:
    return op("isinf", torch.bool, value)


def _expand_index(x: TensorValue, dims: Any, index: Sequence[Index]) -> list[Index]:
    rdims = _dims(x, dims)
    it = iter(index)
    return [Index() if d in rdims else next(it) for d in range(len(x.size))]


def _reshape_keep(total: TensorValue, size: tuple[Any, ...]) -> TensorValue:
    real = [k for k, s in enumerate(total.size) if s != 1]
    new_real = [k for k, s in enumerate(size) if s != 1]

    def loader(idx: Sequence[Index]) -> Expr:
        out = [Index()] * len(total.size)
        for o, nr in zip(real, new_real):
            out[o] = idx[nr]
        return total.loader(out)

    return TensorValue(size, total.dtype, loader, total.device, cost=1)


def _per_count(value: TensorValue, count: float | Per, dtype: torch.dtype) -> TensorValue:
    def loader(idx: Sequence[Index]) -> Expr:
        v = value.loader(idx)
        return op("cast", dtype, divided(v, count, v.dtype))

    return TensorValue(value.size, dtype, loader, value.device, cost=1)


@lowering(aten.var.correction, aten.var_mean.correction)
def _var_lower(ctx: Any, x: TensorValue, dims: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    if x.dtype == torch.float64 and not _widened(ctx.current_node.args[0]):
        # A double's sums may overflow where eager's Welford update does not: the mean of two values near the
        # largest double is finite in eager, inf as a sum. Eager's kernel runs.
        return ctx.fallback("the moments of a double input may overflow as sums")
    var, mean = _var(ctx, x, dims, correction, keepdim)
    if ctx.current_node.target is not aten.var_mean.correction:
        return var
    return var, _mean_in_order(ctx, x, dims, keepdim, mean)


def _widened(node: Any) -> bool:
    """Whether ``node`` is a float32 or 16-bit tensor converted to double, whose sums cannot overflow."""
    source = node.args[0] if isinstance(node, torch.fx.Node) and node.target in _CONVERSIONS else None
    value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    return isinstance(value, torch.Tensor) and value.dtype in (torch.float32, torch.float16, torch.bfloat16)


_CONVERSIONS = (aten._to_copy.default, torch.ops.prims.convert_element_type.default)
_NORMALIZED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def lowers_layer_norm(dtype: torch.dtype, affine_dtypes: Sequence[torch.dtype], empty: bool) -> bool:
    """Whether a ``native_layer_norm`` of a ``dtype`` input (with a weight and a bias of ``affine_dtypes``) is lowered
    whole: a floating type shared by all three and no empty dim. Eager's kernel of mixed types returns float32
    statistics where the fake kernel says the input's type, so such a call is never left to aten."""
    return dtype in _NORMALIZED_DTYPES and all(d == dtype for d in affine_dtypes) and not empty


@lowering(aten.native_layer_norm.default)
def _layer_norm(ctx: Any, x: TensorValue, normalized_shape: Any, weight: Any, bias: Any, eps: float) -> Any:
    """``native_layer_norm`` as eager's CPU kernel computes it: the row's moments in the accumulator type (float32
    for a 16-bit input), and the output ``(x - mean) * rstd``, then ``* weight + bias``, rounded once to the
    input's type; the mean and ``rstd`` are returned in it too. ``rstd`` is NaN where the mean's square overflows,
    as eager's moments are (see ``_decompositions._normalized_as_eager``).

    The op reaches the lowering whole only where ``lowers_layer_norm`` holds and its input is laid out as
    ``torch.empty`` lays it out (see ``_decompositions._kept_for_canonical_inputs``); it is decomposed elsewhere.
    """
    affine = [t for t in (weight, bias) if t is not None]
    empty = any(isinstance(s, int) and s == 0 for s in x.size)
    if not all(isinstance(t, TensorValue) for t in affine) or not lowers_layer_norm(
        x.dtype, [t.dtype for t in affine], empty
    ):
        raise NotImplementedError(
            f"inductor-lite: native_layer_norm of {x.dtype} (weight and bias {[t.dtype for t in affine]}, sizes"
            f" {x.size}) reached its lowering: such a call is decomposed before lowering"
        )
    acc = opmath_dtype(x.dtype)
    # Read four times, as eager's kernel reads it: contiguous, computed once (a permuted or computed input is
    # copied first, as the kernel's own ``contiguous()`` does).
    view = ctx.strided_view(x) if x.cost == 0 else None
    canonical = contiguous_strides(x.size)
    if view is None or not all(_sym.eq(s, 1) or _sym.eq(a, b) for s, a, b in zip(x.size, view[1], canonical)):
        x = ctx.realize(x, canonical)
    rank, k = len(x.size), len(normalized_shape)
    x_acc = ctx.cast_value(x, acc)
    var, mean = _var(ctx, x_acc, list(range(rank - k, rank)), 0, True, (acc, acc))

    def rstd_loader(idx: Sequence[Index]) -> Expr:
        m, rstd = mean.loader(idx), op("rsqrt", acc, op("add", acc, var.loader(idx), const(eps, acc)))
        return op("where", acc, op("isinf", torch.bool, op("mul", acc, m, m)), const(math.nan, acc), rstd)

    rstd = ctx.realize(TensorValue(var.size, acc, rstd_loader, ctx.device, cost=2))

    def row(idx: Sequence[Index]) -> list[Index]:
        return [*idx[: rank - k], *[Index()] * k]

    def out_loader(idx: Sequence[Index]) -> Expr:
        r = rstd.loader(row(idx))
        value = op("mul", acc, op("sub", acc, x_acc.loader(idx), mean.loader(row(idx))), r)
        if weight is not None:
            value = op("mul", acc, value, op("cast", acc, weight.loader(idx[rank - k :])))
        if bias is not None:
            value = op("add", acc, value, op("cast", acc, bias.loader(idx[rank - k :])))
        return op("cast", x.dtype, value)

    out = TensorValue(x.size, x.dtype, out_loader, ctx.device, cost=3 + len(affine))
    uses = [user for user in ctx.current_node.users if user.target is operator.getitem and user.args[1] == 0]
    if sum(len(user.users) for user in uses) > 1:  # (a getitem of it is not realized for its users)
        out = ctx.realize(out, dense_strides(ctx.current_val_at(0)))
    return out, ctx.cast_value(mean, x.dtype), ctx.cast_value(rstd, x.dtype)
