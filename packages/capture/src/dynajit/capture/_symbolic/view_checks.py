"""Whether eager's ``view`` accepts a tensor's layout for a shape, by ATen's own rule.

Fake tensors run torch's reference ``view``, which checks each pair of neighbouring dims and lets any pair with
a size-1 dim through: dims of sizes ``(2, 1, 2)`` with strides ``(4, 2, 1)`` (a chunk of a contiguous tensor)
merge there, while ATen's kernel skips the size-1 dim, compares the two others, and raises "view size is not
compatible with input tensor's size and stride". The trace would return a view where eager raises. This module
decides as ATen's ``computeStride`` does; on symbolic sizes each comparison is guarded by the ShapeEnv as it is
decided, so a later call of other sizes is decided again.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from dynajit.capture._symbolic.variables import raises_in_python

_VIEW_ERROR = (
    "view size is not compatible with input tensor's size and stride (at least one dimension spans across two "
    "contiguous subspaces). Use .reshape(...) instead."
)


def viewable(sizes: Sequence[Any], strides: Sequence[Any], shape: Sequence[Any]) -> bool:
    """Whether a tensor of ``sizes`` and ``strides`` views as ``shape`` (same element count, no -1) without a copy."""
    if not sizes:
        return True
    numel = functools.reduce(operator.mul, sizes, 1)
    if numel == 0:
        return True  # (an empty tensor views as any shape of its count)
    view_d = len(shape) - 1
    base_stride, tensor_numel, view_numel = strides[-1], 1, 1
    for tensor_d in range(len(sizes) - 1, -1, -1):
        tensor_numel *= sizes[tensor_d]
        # A chunk of dims ends where the next dim out is not size 1 and does not continue it.
        if tensor_d == 0 or (sizes[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if tensor_d > 0:
                base_stride, tensor_numel, view_numel = strides[tensor_d - 1], 1, 1
    return view_d == -1


def _requested_shape(args: tuple[Any, ...], numel: Any) -> list[Any] | None:
    """The shape ``view(*args)`` asks for with its -1 resolved, or None for a dtype view or a shape it rejects."""
    shape = list(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)) else list(args)
    if not all(isinstance(s, (int, torch.SymInt)) for s in shape):
        return None
    known = functools.reduce(operator.mul, [s for s in shape if not (isinstance(s, int) and s == -1)], 1)
    free = [i for i, s in enumerate(shape) if isinstance(s, int) and s == -1]
    if len(free) > 1 or (free and known == 0):
        return None  # (eager's own shape errors, which the fake raises too)
    if free:
        shape[free[0]] = numel // known
    return shape


def check_view(name: str, example: torch.Tensor | None, args: tuple[Any, ...]) -> None:
    """Raise in Python (eager's error) where ``example.view(*args)`` (``name`` "view") or ``view_as`` raises in
    eager."""
    if example is None:
        return
    if name == "view_as":
        if not args or not isinstance(args[0], torch.Tensor):
            return
        args = (tuple(args[0].shape),)
    shape = _requested_shape(args, example.numel())
    if shape is None or free_unbacked_symbols((*example.shape, *example.stride(), *shape)):
        return  # (a size read from tensor data has no value to decide by: the fake's checks hold at run time)
    if functools.reduce(operator.mul, shape, 1) != example.numel():
        return  # (a count that differs raises in the fake as in eager)
    if not viewable(tuple(example.shape), tuple(example.stride()), shape):
        raises_in_python(f"{name} raises in eager for this layout ({_VIEW_ERROR})")
