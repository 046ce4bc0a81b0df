"""Outputs AOT autograd rebuilds as views keep eager's negative and conjugate bits.

AOT autograd returns an output that is a view of an input or of another value of the graph by rebuilding it
from its base at every call. Where it cannot replay the view's functions (their sizes are symbolic), it
rebuilds it with ``as_strided`` over the base's memory, which carries neither bit: the memory of
``z.conj().imag`` holds the imaginary parts unnegated, and aten negates them as it reads through the view's
negative bit. Rebuilt without it, a dynamic graph's ``z.conj().imag.unsqueeze(0).expand(3, n, n)`` gave the
values unnegated (fuzz a194:1048). Each such output whose bits differ from its traced value's gets them back as
a view (``_neg_view``, ``conj``), so its values, and the gradient through it, are eager's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

__all__ = ["restoring_view_bits"]


def _bits(t: torch.Tensor) -> tuple[bool, bool]:
    return t.is_neg(), t.is_conj()


def restoring_view_bits(forward: Callable[..., Any], gm: torch.fx.GraphModule) -> Callable[..., Any]:
    """Wrap ``forward`` (what AOT autograd returns for ``gm``) so each output traced as a view with a negative or
    conjugate bit, or of a base with one, has the traced value's bits; ``forward`` itself when there is none."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    expected: dict[int, tuple[bool, bool]] = {}
    for index, node in enumerate(values):
        meta = node.meta if isinstance(node, torch.fx.Node) else {}
        value = meta.get("example_value", meta.get("val"))
        if isinstance(value, torch.Tensor) and value._base is not None:
            if any(_bits(value)) or any(_bits(value._base)):
                expected[index] = _bits(value)
    if not expected:
        return forward

    def call(*args: Any) -> Any:
        outputs = forward(*args)
        restored = None
        for index, (negative, conjugate) in expected.items():
            out = outputs[index]
            if not isinstance(out, torch.Tensor) or _bits(out) == (negative, conjugate):
                continue
            if out.is_neg() != negative:
                out = torch._neg_view(out)
            if out.is_conj() != conjugate and out.is_complex():
                out = out.conj()
            restored = list(outputs) if restored is None else restored
            restored[index] = out
        if restored is None:
            return outputs
        return type(outputs)(restored) if isinstance(outputs, tuple) else restored

    call.__dict__.update(forward.__dict__)  # AOT autograd's zero_grad, named_parameters, named_buffers
    return call
