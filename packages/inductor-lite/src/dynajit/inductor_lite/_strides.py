"""The layouts and storages eager gives values, which lowering reproduces in what a graph returns.

Fake kernels and functionalized tracing sometimes lay a result out other than eager's kernel does
(``eager_layout``); an output is a new buffer in eager's strides (``dense_strides``, ``own_layout``), or a view
of the buffer that holds its storage's whole content (``whole_storage``, ``alias_root``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import sympy
import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._prims_common import compute_elementwise_output_strides, make_contiguous_strides_for
from torch._prims_common import is_non_overlapping_and_dense_or_false as is_non_overlapping_and_dense
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import _disable_current_modes

from dynajit.inductor_lite import _sym

__all__ = [
    "alias_root",
    "dense_strides",
    "eager_layout",
    "is_dynamic",
    "overlapping",
    "own_layout",
    "refake",
    "same_storage",
    "same_strides",
    "storage_of",
    "whole_storage",
]

aten = torch.ops.aten


# Pointwise ops whose fake kernels are Python references built of several prims: their results' strides
# follow the last prim's operands, not TensorIterator's rule eager's kernel follows (``a // b`` with ``a``
# transposed is laid out as ``a`` in eager, as ``b`` in the fake value).
REFERENCE_LAYOUTS = {aten.div.Tensor_mode, aten.div.Scalar_mode, aten.floor_divide.default, aten.floor_divide.Scalar,
    aten.copysign.Tensor, aten.copysign.Scalar}  # fmt: skip


def eager_layout(node: torch.fx.Node) -> bool:
    """Give ``node``'s value the strides eager's kernel gives its result, when its fake kernel lays it out otherwise."""
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor) or is_dynamic(val):
        return False
    if getattr(node.target, "is_view", False):
        return _eager_view_layout(node, val)
    if node.target not in REFERENCE_LAYOUTS:
        return False
    values = [a.meta.get("val") for a in node.args if isinstance(a, torch.fx.Node)]
    tensors = [t for t in values if isinstance(t, torch.Tensor) and not is_dynamic(t)]
    if not tensors or len(tensors) != len(values):
        return False
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    if tuple(val.shape) != tuple(shape):
        return False
    with val.fake_mode:  # type: ignore[attr-defined]
        strides = compute_elementwise_output_strides(*(t.expand(shape) for t in tensors))
        canonical = make_contiguous_strides_for(val.shape)
        if same_strides(strides, canonical, val.shape):
            strides = canonical  # TensorIterator gives a contiguous result empty()'s strides on size-1 dims too
        if tuple(strides) == val.stride():
            return False
        node.meta["val"] = torch.empty_strided(val.shape, strides, dtype=val.dtype, device=val.device)
    return True


def _eager_view_layout(node: torch.fx.Node, val: torch.Tensor) -> bool:
    """A view's strides as eager's view kernel gives them (functionalized tracing may give a size-1 dim another
    stride: `expand` adds a leading dim with stride 1 where eager's has 0), since an op copying the view in
    eager's order of strides (`.long()`, `x + 1`) lays its result out by them. Recomputed on meta tensors."""
    tensors = [a.meta.get("val") for a in node.all_input_nodes]
    if not all(isinstance(t, torch.Tensor) and not is_dynamic(t) for t in tensors):
        return False

    def meta(a: Any) -> Any:
        t = a.meta.get("val") if isinstance(a, torch.fx.Node) else a
        if not isinstance(t, torch.Tensor):
            return t
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")

    target: Any = node.target
    try:
        with _disable_current_modes():
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), meta)
            out = target(*args, **kwargs)
    except Exception:  # a view meta tensors cannot express (an offset past their storage): keep the fake value
        return False
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(val.shape) or out.stride() == val.stride():
        return False
    with val.fake_mode:  # type: ignore[attr-defined]
        node.meta["val"] = val.as_strided(val.shape, out.stride(), val.storage_offset())  # still a view of its base
    return True


def refake(node: torch.fx.Node) -> bool:
    """Recompute ``node``'s fake value from its inputs' (one of which :func:`_eager_layout` laid out again)."""
    val = node.meta.get("val")
    mode = next((v.fake_mode for v in pytree.tree_leaves(val) if hasattr(v, "fake_mode")), None)
    if mode is None or not (isinstance(node.target, torch._ops.OpOverload) or node.target is operator.getitem):
        return False
    args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta.get("val"))
    target: Any = node.target
    with mode:
        node.meta["val"] = target(*args, **kwargs)
    return True


def whole_storage(val: torch.Tensor) -> bool:
    """Whether ``val`` is its storage's whole content, each element once (views of it are addressed within it)."""
    if val.storage_offset() != 0 or (_sym.prod(_sym.shape_of(val)) != 0 and not is_non_overlapping_and_dense(val)):
        return False
    # A dense tensor's bytes count each stride as ``Max(1, size)`` (a size-0 dim keeps the strides apart); with
    # no size 0 that is the size, and with one there is no element a view could address beyond the tensor.
    nbytes = _sym.nonempty(_sym.norm(val.untyped_storage().nbytes()))
    return _sym.eq(_sym.norm(val.numel() * val.element_size()), nbytes)


def alias_root(node: torch.fx.Node, storage: Any) -> torch.fx.Node:
    """The first node up ``node``'s chain of views (first arguments, through ``getitem`` of split results) whose
    value still has ``storage``."""
    while node.op == "call_function" and node.args:
        source = node.args[0]
        if node.target is operator.getitem and isinstance(source, torch.fx.Node):
            if not isinstance(source.meta.get("val"), (tuple, list)) or not source.args:
                return node  # an item of a multi-output op (max.dim): a tensor of its own
            source = source.args[0]
        if not isinstance(source, torch.fx.Node):
            return node
        source_storage = storage_of(source.meta.get("val"))  # None for a SymInt argument (`n - x`)
        if source_storage is None or source_storage != storage:
            return node
        node = source
    return node


def same_strides(strides: Sequence[Any], expected: Sequence[Any], size: Sequence[Any]) -> bool:
    """Whether two layouts of ``size`` address the same elements (strides of length-1 dims do not matter)."""
    if any(n == 0 for n in size):
        return True
    return all(n == 1 or _sym.norm(a) == _sym.norm(b) for a, b, n in zip(strides, expected, size, strict=True))


def storage_of(val: Any) -> Any:
    """The identity of ``val``'s storage (a fake tensor's too), or None when it is not a tensor."""
    if not isinstance(val, torch.Tensor):
        return None
    return StorageWeakRef(val.untyped_storage())


def same_storage(a: Any, b: Any) -> bool:
    """Whether two storage identities (None for a value that is not a tensor) are the same storage."""
    return a is not None and b is not None and a == b


def dense_strides(val: Any) -> tuple[Any, ...] | None:
    if isinstance(val, torch.Tensor) and _sym.prod(_sym.shape_of(val)) != 0 and is_non_overlapping_and_dense(val):
        return _sym.strides_of(val)
    return None


def overlapping(val: Any) -> bool:
    """Whether two of ``val``'s elements share memory: a stride of 0 on a dim of more than one element."""
    return (
        isinstance(val, torch.Tensor)
        and any(_broadcast_dims(val.shape, val.stride()))
        and _sym.prod(_sym.shape_of(val)) != 0
    )


def _broadcast_dims(sizes: Sequence[Any], strides: Sequence[Any]) -> list[bool]:
    """Per dim, whether it repeats one element: a stride of 0 over more than one."""
    return [_sym.norm(stride) == 0 and _sym.norm(size) != 1 for size, stride in zip(sizes, strides)]


def own_layout(val: Any) -> tuple[tuple[Any, ...], tuple[Any, ...] | None] | None:
    """Eager's strides for a new buffer holding ``val`` (``x[::2]``'s gaps, ``expand``'s zeros), and the size of
    that buffer when ``val`` broadcasts it (stride-0 dims hold one element), else None for ``val``'s own size.

    None when the strides do not provably address each of the buffer's elements once (dims interleave).
    """
    if not isinstance(val, torch.Tensor) or _sym.prod(_sym.shape_of(val)) == 0:
        return None
    sizes, strides = _sym.shape_of(val), _sym.strides_of(val)
    broadcast = _broadcast_dims(sizes, strides)
    dims = sorted(
        ((stride, size) for size, stride, b in zip(sizes, strides, broadcast) if not b and _sym.norm(size) != 1),
        key=lambda dim: _sym.hint(dim[0]),
    )
    extent: Any = 1
    for stride, size in dims:
        if not _sym.provably_le(extent, stride):
            return None  # two elements may share memory or interleave
        extent = _sym.norm(stride * size)
    base = tuple(1 if b else size for size, b in zip(sizes, broadcast)) if any(broadcast) else None
    return strides, base


def is_dynamic(value: Any) -> bool:
    if isinstance(value, torch.SymInt):
        return not isinstance(value.node.expr, sympy.Integer)
    return isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
