"""Lowerings whose elements read one input or another by position: concatenation, constant padding, and
scatters into a slice or a select.

Each output element tests which range of a dimension it falls in and reads only the input that owns
that range, through a ``masked`` value (its loads are made only where its condition holds, since the
shifted index is out of bounds elsewhere). So these ops fuse with what computes their inputs and with
what reads them, instead of being aten calls that write every input out first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._index import Index
from dynajit.inductor_lite._ir import Expr, TensorValue, const, masked, op
from dynajit.inductor_lite._lowering import lowering, to_value

__all__ = ["MAX_CAT_PIECES"]

aten = torch.ops.aten

# A concatenation of more pieces stays one aten call: each element would test every piece's range.
MAX_CAT_PIECES = 8


def _position(value: Any) -> Expr:
    return Expr("index", (Index.of(value),), torch.int64)


def _within(here: Expr, low: Any | None, high: Any | None) -> Expr | None:
    """``low <= here < high`` (either bound None: unbounded), or None when both are."""
    tests = []
    if low is not None:
        tests.append(op("ge", torch.bool, here, _position(low)))
    if high is not None:
        tests.append(op("lt", torch.bool, here, _position(high)))
    if not tests:
        return None
    return tests[0] if len(tests) == 1 else op("logical_and", torch.bool, *tests)


def _shifted(idx: Sequence[Index], dim: int, by: Any) -> list[Index]:
    out = list(idx)
    out[dim] = idx[dim] + _sym.norm(-by)
    return out


def _either(cond: Expr | None, inside: Expr, outside: Expr) -> Expr:
    """``inside`` (read only where ``cond`` holds) where ``cond`` holds, else ``outside``."""
    if cond is None:
        return inside
    return op("where", outside.dtype, cond, masked(cond, op("cast", outside.dtype, inside)), outside)


@lowering(aten.cat)
def _cat(ctx: Any, tensors: Sequence[TensorValue], dim: int = 0) -> TensorValue:
    """Each element reads the one piece whose range along ``dim`` holds it (a rotary embedding's
    ``cat((-x2, x1))`` so becomes part of the kernel computing the rotation)."""
    val = ctx.current_val()
    size = _sym.shape_of(val)
    dim = dim % len(size)
    # torch.cat skips 1-D empty pieces whatever the others' rank (legacy behaviour).
    pieces = [t for t in tensors if t.size != (0,) or len(size) == 1]
    if not pieces or len(pieces) > MAX_CAT_PIECES or any(len(t.size) != len(size) for t in pieces):
        return ctx.fallback()
    pieces = [t for t in pieces if t.size[dim] != 0] or pieces[:1]  # an empty piece holds no element
    if all(t.buffer is not None for t in pieces):
        # Nothing computes a piece here, so there is nothing to fuse with: aten copies each piece with memcpy,
        # faster than an element-wise select (a CNN's channel concatenation of convolution outputs).
        return ctx.fallback()
    starts = [0]
    for piece in pieces:
        starts.append(_sym.norm(starts[-1] + piece.size[dim]))
    dt = val.dtype

    def loader(idx: Sequence[Index]) -> Expr:
        here = Expr("index", (idx[dim],), torch.int64)
        last = len(pieces) - 1
        result = op("cast", dt, pieces[last].loader(_shifted(idx, dim, starts[last])))
        if last == 0:
            return result
        result = masked(_within(here, starts[last], None), result)  # type: ignore[arg-type]
        for k in reversed(range(last)):
            cond = _within(here, starts[k] if k else None, starts[k + 1])
            result = _either(cond, pieces[k].loader(_shifted(idx, dim, starts[k])), result)
        return result

    cost = len(pieces) + sum(t.cost for t in pieces if t.buffer is None)
    return TensorValue(size, dt, loader, ctx.device, cost=cost)


@lowering(aten.constant_pad_nd)
def _constant_pad(ctx: Any, x: TensorValue, pad: Sequence[int], value: Any = 0) -> TensorValue:
    """Elements inside the input's range (shifted by the left pads, which may be negative: a crop) read it,
    the others are ``value``."""
    val = ctx.current_val()
    size = _sym.shape_of(val)
    if not all(isinstance(p, int) for p in pad):
        return ctx.fallback()
    dt = val.dtype
    sides = {len(size) - 1 - k: (pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)}

    def loader(idx: Sequence[Index]) -> Expr:
        shifted = list(idx)
        tests = []
        for dim, (left, right) in sides.items():
            shifted = _shifted(shifted, dim, left)
            here = Expr("index", (idx[dim],), torch.int64)
            within = _within(here, left if left > 0 else None, _sym.norm(left + x.size[dim]) if right > 0 else None)
            if within is not None:
                tests.append(within)
        cond = None
        for test in tests:
            cond = test if cond is None else op("logical_and", torch.bool, cond, test)
        return _either(cond, x.loader(shifted), const(value, dt))

    return TensorValue(size, dt, loader, ctx.device, cost=1 + (x.cost if x.buffer is None else 0))


@lowering(aten.slice_scatter)
def _slice_scatter(
    ctx: Any, x: TensorValue, src: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> TensorValue:
    """``x`` with the slice ``start:end`` along ``dim`` read from ``src`` (a slice's gradient)."""
    val = ctx.current_val()
    size = _sym.shape_of(val)
    dim = dim % len(size)
    length = x.size[dim]
    start = 0 if start is None else start
    if step != 1 or not isinstance(start, int) or not isinstance(length, int):
        return ctx.fallback()
    start = max(0, min(length, start + length if start < 0 else start))
    src = to_value(ctx, src, val.dtype)
    dt = val.dtype

    def loader(idx: Sequence[Index]) -> Expr:
        here = Expr("index", (idx[dim],), torch.int64)
        cond = _within(here, start or None, _sym.norm(start + src.size[dim]))
        return _either(cond, src.loader(_shifted(idx, dim, start)), op("cast", dt, x.loader(idx)))

    cost = 2 + sum(t.cost for t in (x, src) if t.buffer is None)
    return TensorValue(size, dt, loader, ctx.device, cost=cost)


@lowering(aten.select_scatter)
def _select_scatter(ctx: Any, x: TensorValue, src: Any, dim: int, index: int) -> TensorValue:
    """``x`` with the select ``index`` along ``dim`` read from ``src`` (a select's gradient)."""
    val = ctx.current_val()
    size = _sym.shape_of(val)
    dim = dim % len(size)
    if not isinstance(index, int) or not isinstance(x.size[dim], int) or not -x.size[dim] <= index < x.size[dim]:
        return ctx.fallback()  # (aten's kernel raises eager's IndexError for an index out of range)
    index = index % x.size[dim]
    src = to_value(ctx, src, val.dtype)
    dt = val.dtype

    def loader(idx: Sequence[Index]) -> Expr:
        here = Expr("index", (idx[dim],), torch.int64)
        cond = op("eq", torch.bool, here, _position(index))
        return _either(cond, src.loader([*idx[:dim], *idx[dim + 1 :]]), op("cast", dt, x.loader(idx)))

    cost = 2 + sum(t.cost for t in (x, src) if t.buffer is None)
    return TensorValue(size, dt, loader, ctx.device, cost=cost)
