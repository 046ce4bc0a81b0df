"""A compiled backward runs below autograd's dispatch layers: each aten call it makes skips them.

Autograd's layers (``VariableType``, ``ADInplaceOrView``) cost about a microsecond on every aten call, a matrix
product's included, even under ``no_grad``, where AOT autograd runs a backward. A backward's results are
gradients, which autograd takes as they are: it records no history for them, and nothing the caller holds is a
view they could alias. Its views (an input of a matrix product seen through ``as_strided``) live only inside the
call. A forward is not run this way: its views may be saved for the backward or returned to the caller, where
autograd must see them as views (a shared version counter makes an in-place change to one visible to the
other's saved-tensor check).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

__all__ = ["running_below_autograd"]


def running_below_autograd(compile_backward: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a boxed backward compiler so each call of what it compiles runs below autograd's dispatch layers."""

    def compile_below(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        compiled = compile_backward(graph_module, example_inputs)
        boxed = getattr(compiled, "_boxed_call", False)

        def run(args: list[Any]) -> Any:
            with torch._C._AutoDispatchBelowADInplaceOrView():
                return compiled(args) if boxed else compiled(*args)

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return compile_below
