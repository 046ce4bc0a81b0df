"""In-place writes that keep eager's strides when AOT autograd functionalizes a graph.

Functionalization turns ``x.sub_(1)`` into ``x = sub(x, 1)`` and adopts the
result's layout for ``x``. Eager keeps ``x``'s own strides, and the two differ
for a tensor that is not dense (``t[::2]``, a narrowed column), and for a dense
one in another order (a transpose, channels-last) under the many out-of-place
ops that return a contiguous result (``masked_fill``, ``scatter``,
``index_add``, ``tril``, ``cumsum``): every later choice made from strides then
goes the other way — ``flatten`` views where eager copies, ``contiguous``
returns its input, ``view`` succeeds or fails, a pointwise result is laid out
otherwise. :func:`keep_written_strides` routes each such write through a fresh
tensor and a ``copy_`` back, which functionalization maps onto the written
tensor's own layout. Contiguous tensors (nearly all of them) are left as they are.
"""

from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx
from torch._prims_common import is_contiguous_or_false

from dynajit.fxgraph._meta import EXAMPLE_VALUE

__all__ = ["AUGMENTED_OPERATORS", "keep_written_strides", "passes_inplace", "writes_elements", "writes_in_place"]

#: Python's augmented assignments on a tensor: each writes its left operand.
AUGMENTED_OPERATORS: frozenset[Any] = frozenset(
    {
        operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv, operator.imod,
        operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift, operator.irshift,
        operator.setitem,
    }
)  # fmt: skip

#: In-place ops that give their tensor other memory or only mark it; ``copy_`` already keeps the layout.
NOT_VALUE_WRITES: frozenset[str] = frozenset(
    {"resize_", "resize_as_", "set_", "copy_", "requires_grad_", "share_memory_"}
)


@functools.cache
def writes_elements(name: str) -> bool:
    """Whether the aten op ``name`` (``add_``, ``copy_``) writes into its first argument's elements, not only its
    layout (``t_``, tagged ``inplace_view``): an in-place name whose schema marks that argument written."""
    if not name.endswith("_") or name.startswith("_") or name == "requires_grad_":
        return False
    packet = getattr(torch.ops.aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    overloads = [getattr(packet, o) for o in packet.overloads()]
    if any(torch.Tag.inplace_view in o.tags for o in overloads):
        return False
    return any(
        o._schema.arguments
        and o._schema.arguments[0].alias_info is not None
        and o._schema.arguments[0].alias_info.is_write
        for o in overloads
    )


def _writes_values(name: str) -> bool:
    """Whether the in-place op ``name`` writes element values that functionalization would lay out anew."""
    return name not in NOT_VALUE_WRITES and writes_elements(name)


def _written_argument(node: torch.fx.Node) -> int | str | None:
    """Which argument ``node`` writes values into (a position or ``"out"``), or None when it writes none."""
    if node.op not in ("call_function", "call_method"):
        return None
    if isinstance(node.kwargs.get("out"), torch.fx.Node):
        return "out"
    if not node.args:  # the written tensor passed by keyword: not a form capture records
        return None
    if node.target in AUGMENTED_OPERATORS or (
        node.op == "call_function" and passes_inplace(node.target, node.args, node.kwargs)
    ):
        return 0
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    if name == "__setitem__" and node.op == "call_method":
        return 0
    if not isinstance(name, str) or not _writes_values(name):
        return None
    if node.op == "call_function" and node.target not in (
        getattr(torch, name, None),
        getattr(torch.Tensor, name, None),
    ):
        return None  # not a torch in-place function (``torch.relu_``) or method (``torch.Tensor.mul_``)
    return 0


def writes_in_place(node: torch.fx.Node) -> bool:
    """Whether ``node`` writes a tensor as the program wrote it: an in-place function or method (``copy_`` and
    ``resize_`` too), an ``out=`` or ``inplace=True`` call, an augmented or item assignment, or such a write that
    :func:`keep_written_strides` routed through a copy."""
    if _written_argument(node) is not None or hasattr(node.target, "keeps_strides_of"):
        return True
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return name in NOT_VALUE_WRITES


def passes_inplace(target: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
    """Whether a call of ``target`` passes ``inplace=True``, by keyword or by position (``hardtanh(x, -1.0, 1.0, True)``).

    Such a call writes into its first argument as ``x.relu_()`` does.
    """
    if kwargs.get("inplace") is True:
        return True
    position = _inplace_position(target) if callable(target) else None
    return position is not None and position < len(args) and args[position] is True


@functools.cache
def _inplace_position(fn: Any) -> int | None:
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a builtin without a signature takes no ``inplace``
        return None
    return names.index("inplace") if "inplace" in names else None


def _known_contiguous(value: Any) -> bool:
    # A stride that depends on a symbol no guard settles counts as not contiguous.
    return isinstance(value, torch.Tensor) and is_contiguous_or_false(value)


def write_keeping_strides(fn: Callable[..., Any], where: int | str, *args: Any, **kwargs: Any) -> Any:
    """Run the in-place call ``fn(*args, **kwargs)`` so that the written tensor keeps its strides.

    A tensor that is not contiguous is written through a fresh copy and a ``copy_`` back; ``where`` names
    the written argument (a position, or ``"out"``). The call returns what the in-place call returns.
    """
    target = kwargs[where] if isinstance(where, str) else args[where]
    if not isinstance(target, torch.Tensor) or _known_contiguous(target):
        return fn(*args, **kwargs)
    scratch = target.clone()
    if isinstance(where, str):
        kwargs = {**kwargs, where: scratch}
    else:
        args = (*args[:where], scratch, *args[where + 1 :])
    result = fn(*args, **kwargs)
    if scratch.shape != target.shape:  # an ``out=`` of another shape is resized, as eager resizes it
        target.resize_(scratch.shape)
    target.copy_(scratch)
    return target if result is scratch else result


def _callable(node: torch.fx.Node) -> Callable[..., Any] | None:
    """What ``node`` calls, as a function of all its arguments (a method through ``torch.Tensor``)."""
    if node.op == "call_method":
        return getattr(torch.Tensor, str(node.target), None)
    return node.target  # type: ignore[return-value]


@functools.cache
def _writer(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as a graph target that keeps the written tensor's strides (FX cannot pass a function as an argument)."""

    def write(where: int | str, *args: Any, **kwargs: Any) -> Any:
        return write_keeping_strides(fn, where, *args, **kwargs)

    write.__name__ = write.__qualname__ = f"{getattr(fn, '__name__', 'write')}_keeping_strides"
    write.keeps_strides_of = fn  # type: ignore[attr-defined]
    return write


def keep_written_strides(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Return ``gm``, or a copy whose in-place writes into tensors not known to be contiguous keep their strides.

    For a backend that hands the graph to AOT autograd: under functionalization, a tensor written in
    place takes the layout of the out-of-place result, which for a tensor that is not contiguous may
    differ from eager's. A write whose target's recorded value is contiguous is left untouched; the others call
    :func:`write_keeping_strides`, which checks again with the values being traced.
    """
    writes = []
    for node in gm.graph.nodes:
        where = _written_argument(node)
        if where is None:
            continue
        written = node.kwargs[where] if isinstance(where, str) else node.args[where]
        if isinstance(written, torch.fx.Node) and _known_contiguous(written.meta.get(EXAMPLE_VALUE)):
            continue
        if _callable(node) is not None:
            writes.append((node, where))
    if not writes:
        return gm
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    rewritten = dict(writes)
    for node in gm.graph.nodes:
        if node in rewritten:
            args = torch.fx.map_arg(node.args, env.__getitem__)
            kwargs = torch.fx.map_arg(node.kwargs, env.__getitem__)
            writer = _writer(_callable(node))  # type: ignore[arg-type]
            new = graph.create_node("call_function", writer, (rewritten[node], *args), kwargs, name=node.name)
            new.meta = dict(node.meta)
        else:
            new = graph.node_copy(node, env.__getitem__)
        env[node] = new
    result = torch.fx.GraphModule(gm, graph, gm.__class__.__name__)
    result.meta = dict(getattr(gm, "meta", {}))
    return result
