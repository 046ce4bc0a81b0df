"""Outputs AOT autograd returns keep eager's view-ness and eager's negative and conjugate bits.

An output eager makes as a tensor of its own can come back from AOT autograd's inference graph as a view: that
graph keeps no in-place op, so eager's product of ``x @ w`` with a vector ``x`` (``squeeze_`` of a matrix)
comes back a ``squeeze`` view, which a later ``detach_()`` refuses. :func:`owning_eager_products` returns such
an output detached, a tensor of its own over the same memory, as eager's.

AOT autograd returns an output that is a view of an input or of another value of the graph by rebuilding it
from its base at every call. Where it cannot replay the view's functions (their sizes are symbolic), it
rebuilds it with ``as_strided`` over the base's memory, which carries neither bit: the memory of
``z.conj().imag`` holds the imaginary parts unnegated, and aten negates them as it reads through the view's
negative bit. Rebuilt without it, a dynamic graph's ``z.conj().imag.unsqueeze(0).expand(3, n, n)`` gave the
values unnegated (fuzz a194:1048). Each such output that comes back a view whose bits differ from its traced
value's gets them back as a view (``_neg_view``, ``conj``), so its values, and the gradient through it, are eager's.
An output whose memory the graph writes in place is left as it comes: there AOT autograd's functionalized base
holds the values as read, and its rebuilt view without the bits reads them right (``v += 1`` on
``z.conj().imag``, fuzz a196:166).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph._inplace import writes_in_place
from dynajit.fxgraph._targets import mutates

__all__ = ["detaching_outputs", "mending_outputs", "owning_eager_products", "restoring_view_bits"]


def _bits(t: torch.Tensor) -> tuple[bool, bool]:
    return t.is_neg(), t.is_conj()


def _value(node: Any) -> Any:
    meta = node.meta if isinstance(node, torch.fx.Node) else {}
    return meta.get("example_value", meta.get("val"))


def _storage(value: Any) -> int | None:
    """The identity of a traced tensor's memory (views share it); None for anything else, or one unknown (a
    write whose target has no traced value counts as a write into every tensor)."""
    return value.untyped_storage()._cdata if isinstance(value, torch.Tensor) else None


def _outputs(gm: torch.fx.GraphModule) -> tuple[Any, ...]:
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return tuple(output.args[0]) if isinstance(output.args[0], (tuple, list)) else (output.args[0],)


def owning_eager_products(forward: Callable[..., Any], gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """Wrap ``forward`` (what AOT autograd returns for ``gm``) so each output traced as a tensor of its own
    that comes back a view without gradients is returned detached; ``forward`` itself when no output is one."""
    owned = [
        i for i, node in enumerate(_outputs(gm)) if isinstance(v := _value(node), torch.Tensor) and not v._is_view()
    ]
    return detaching_outputs(forward, owned)


def _detached(out: Any) -> Any:
    return out.detach() if isinstance(out, torch.Tensor) and out._is_view() and not out.requires_grad else out


def detaching_outputs(forward: Callable[..., Any], indices: list[int]) -> Callable[..., Any]:
    """Wrap ``forward`` so each output at ``indices`` that comes back a view without gradients is returned
    detached (the same memory, no view: eager's tensor of its own, whose ``detach_()`` autograd allows); with
    gradients a detached tensor cannot stand for it, and it is returned as it comes."""
    return mending_outputs(forward, dict.fromkeys(indices, _detached))


def restoring_view_bits(forward: Callable[..., Any], gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """Wrap ``forward`` (what AOT autograd returns for ``gm``) so each output traced as a view with a negative or
    conjugate bit, or of a base with one, has the traced value's bits; ``forward`` itself when there is none."""
    nodes = list(gm.graph.nodes)
    # (a write into such a view's memory is functionalized into a base holding the values as read, without the
    # bits: AOT autograd's view of it reads right as it comes, fuzz a196:166)
    written = {
        _storage(_value(n.kwargs.get("out", n.args[0] if n.args else None)))
        for n in nodes
        if n.op in ("call_function", "call_method") and (mutates(n) or writes_in_place(n))
    }
    if None in written:
        return forward
    values = _outputs(gm)
    expected: dict[int, tuple[bool, bool]] = {}
    for index, node in enumerate(values):
        value = _value(node)
        if isinstance(value, torch.Tensor) and value._base is not None and _storage(value) not in written:
            if any(_bits(value)) or any(_bits(value._base)):
                expected[index] = _bits(value)

    def restoring(negative: bool, conjugate: bool) -> Callable[[Any], Any]:
        def restored(out: Any) -> Any:
            if not isinstance(out, torch.Tensor) or out._base is None:
                return out
            if out.is_neg() != negative:
                out = torch._neg_view(out)
            if out.is_conj() != conjugate and out.is_complex():
                out = out.conj()
            return out

        return restored

    return mending_outputs(forward, {index: restoring(*bits) for index, bits in expected.items()})


def mending_outputs(forward: Callable[..., Any], mends: dict[int, Callable[[Any], Any]]) -> Callable[..., Any]:
    """Wrap ``forward`` (what AOT autograd returns) so output ``i`` comes back as ``mends[i](output)`` at every
    call, in a sequence of the type ``forward`` returns; ``forward`` itself when there is nothing to mend."""
    if not mends:
        return forward

    def call(*args: Any) -> Any:
        outputs = forward(*args)
        mended = list(outputs)
        for index, mend in mends.items():
            mended[index] = mend(mended[index])
        return type(outputs)(mended) if isinstance(outputs, tuple) else mended

    call.__dict__.update(getattr(forward, "__dict__", {}))  # AOT autograd's zero_grad, named_parameters, named_buffers
    return call
