"""Lowerings whose elements are read at positions other tensors hold: an embedding's rows, a gather's elements,
a classification loss's score at each row's target.

On the C++ generator each is a lazy value whose every element is an indirect load (see
:func:`~dynajit.inductor_lite._ir.indirect_load`): the row or element the indices name, checked against the
size they index, with eager's error for one out of range. So the lookups of a transformer's token, position and
type embeddings, their sum and the layer norm after it are one kernel, not three aten calls and a kernel. On
Triton's generator (:data:`INDIRECT`), and for the lookups eager checks differently, they stay aten calls.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

from dynajit.inductor_lite import _sym
from dynajit.inductor_lite._index import Index, Var
from dynajit.inductor_lite._ir import IndexFault, TensorValue, const, indirect_load, op
from dynajit.inductor_lite._lowering import lowering

__all__ = ["INDIRECT"]

aten = torch.ops.aten

# The ops lowered here: for a code generator without indirect loads (Triton's), they stay aten calls.
INDIRECT = frozenset({"embedding", "gather", "nll_loss_forward"})

# Stand-in variables are named apart from loop variables (and from each other): no name reaches the source.
_slots = itertools.count()

# Eager's own error for an index out of range: IndexError, "index out of range in self".
_EMBEDDING_FAULT = IndexFault("IndexError", "index out of range in self")


@lowering(aten.embedding.default)
def _embedding(
    ctx: Any, weight: TensorValue, indices: TensorValue, padding_idx: int = -1, scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Any:  # fmt: skip
    # (padding_idx, scale_grad_by_freq and sparse change the backward only)
    if len(weight.size) != 2 or indices.dtype not in (torch.int32, torch.int64):
        return ctx.fallback()  # (the checks eager makes of other weights and indices are aten's)
    rows, width = weight.size
    if not _sym.provably_lt(0, width):
        return ctx.fallback()  # (no element would read the indices: eager checks them all the same)
    if ctx.strided_view(weight) is None:
        weight = ctx.realize(weight)
    slot = Var(f"embedding_row{next(_slots)}", rows)

    def loader(index: list[Index]) -> Any:
        row = weight.loader([Index.of(slot), index[-1]])
        return indirect_load(row, slot, indices.loader(index[:-1]), _EMBEDDING_FAULT)

    return TensorValue((*indices.size, width), weight.dtype, loader, weight.device)


@lowering(aten.gather.default)
def _gather(ctx: Any, x: TensorValue, dim: int, index: TensorValue, sparse_grad: bool = False) -> Any:
    # The shapes were checked when the graph was traced (gather's meta function); the values are checked here.
    if not x.size or len(index.size) != len(x.size):
        return ctx.fallback()
    dim %= len(x.size)
    if ctx.strided_view(x) is None:
        x = ctx.realize(x)
    slot = Var(f"gather_position{next(_slots)}", x.size[dim])
    fault = IndexFault("RuntimeError", f"index %lld is out of bounds for dimension {dim} with size %lld")

    def loader(position: list[Index]) -> Any:
        read = x.loader([*position[:dim], Index.of(slot), *position[dim + 1 :]])
        return indirect_load(read, slot, index.loader(position), fault)

    return TensorValue(tuple(index.size), x.dtype, loader, x.device)


# Eager's own error for a class past the last (or negative) that is not the ignored one.
_TARGET_FAULT = IndexFault("IndexError", "Target %lld is out of bounds.")


@lowering(aten.nll_loss_forward.default)
def _nll_loss(
    ctx: Any, scores: TensorValue, target: TensorValue, weight: Any, reduction: int, ignore_index: int
) -> Any:
    # The mean (1) or sum (2) of each row's negated score at its target class, the rows whose target is
    # ``ignore_index`` left out, and how many rows counted (``total_weight``). A class weight, no reduction and
    # 16-bit scores (eager's kernel accumulates those differently) stay aten calls.
    if weight is not None or reduction not in (1, 2) or scores.dtype not in (torch.float32, torch.float64):
        return ctx.fallback()
    if target.dtype != torch.int64 or len(scores.size) not in (1, 2):
        return ctx.fallback()
    if ctx.strided_view(scores) is None:
        scores = ctx.realize(scores)
    dtype = scores.dtype
    rows = (scores.size[0],) if len(scores.size) == 2 else ()
    classes = scores.size[-1]
    slot = Var(f"target_class{next(_slots)}", classes)
    zero = const(0, dtype)

    def ignored(row: list[Index]) -> Any:
        return op("eq", torch.bool, target.loader(row), const(ignore_index, torch.int64))

    def picked(_: Any, row: list[Index]) -> Any:
        skip = ignored(row)
        value = op("where", torch.int64, skip, const(0, torch.int64), target.loader(row))
        read = indirect_load(scores.loader([*row, Index.of(slot)]), slot, value, _TARGET_FAULT)
        return op("where", dtype, skip, zero, op("neg", dtype, read))

    def counted(_: Any, row: list[Index]) -> Any:
        return op("where", dtype, ignored(row), zero, const(1, dtype))

    total = ctx.reduction((), rows, "sum", picked, dtype)
    count = ctx.reduction((), rows, "sum", counted, dtype)
    if reduction == 2:
        return total, count
    mean = TensorValue((), dtype, lambda idx: op("truediv", dtype, total.loader(idx), count.loader(idx)), ctx.device)
    return mean, count
