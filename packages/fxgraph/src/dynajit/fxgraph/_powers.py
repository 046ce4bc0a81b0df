"""Powers written so Python reads them back as the graph means them.

torch.fx writes a node ``operator.pow(a, b)`` as the source ``a ** b``. With a
negative number on the left that text is ``-2 ** b``, which Python reads as
``-(2 ** b)``: a graph run through its generated code (the ``eager`` and
``aot_eager`` backends, a graph left to aten) then gives ``-4`` where eager's
``(-2) ** 2`` is ``4``. The builtin ``pow`` is the same function written as a
call, ``pow(-2, b)``, so such nodes call it instead.
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any

import torch

__all__ = ["spelled_as_calls", "written_as_call"]

_POWERS = (operator.pow, operator.ipow)


def _reads_negative(value: Any) -> bool:
    """Whether ``value`` is a number whose source text starts with a minus sign (-0.0 and -inf too)."""
    return type(value) in (int, float) and math.copysign(1, value) < 0


def written_as_call(target: Any, args: tuple[Any, ...]) -> Any:
    """The target a ``call_function`` node of ``target(*args)`` should have: ``pow`` for a power whose base is
    a negative number, ``target`` otherwise."""
    if target in _POWERS and args and _reads_negative(args[0]):
        return builtins.pow
    return target


def spelled_as_calls(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with every power of a negative number calling ``pow`` (regenerated in place if any changed).

    For graphs made elsewhere (AOT autograd's, whose symbolic-int powers keep their number) before their
    generated code runs.
    """
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and (target := written_as_call(node.target, node.args)) is not node.target:
            node.target = target
            changed = True
    if changed:
        gm.recompile()
    return gm
