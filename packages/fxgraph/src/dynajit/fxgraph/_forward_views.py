"""A training forward returns no views: AOT autograd's outputs are eager's fresh tensors or its own aliases.

A training forward runs inside an ``autograd.Function``, which marks each view it returns (a backend's output
laid out as a view of its own buffer, ``x.t_()`` of an intermediate) as made inside a custom function:
autograd then refuses the caller's later in-place op on it (``y.unsqueeze_(0)`` after a graph break), which
eager allows on the fresh tensor it returned. Detached, such an output keeps its memory and layout without
being a view; AOT autograd rebuilds the outputs that alias inputs or one another from them. The tensors
the forward returns after those, to save for the backward, never reach the caller and stay as they are (a
split's forward says how many it returns first in its meta).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph._reached_saves import FORWARD_RETURNS

__all__ = ["returning_no_views"]


def returning_no_views(fw_compiler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an AOT autograd forward compiler so the compiled forward (boxed) returns its views detached."""

    def compile_forward(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        compiled = fw_compiler(graph_module, example_inputs)
        boxed = getattr(compiled, "_boxed_call", False)
        returns = graph_module.meta.get(FORWARD_RETURNS)

        def run(args: list[Any]) -> list[Any]:
            outs = compiled(args) if boxed else compiled(*args)
            outs = outs if isinstance(outs, list) else list(outs)
            for i, o in enumerate(outs[:returns]):
                if isinstance(o, torch.Tensor) and o._is_view():
                    outs[i] = o.detach()
            return outs

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return compile_forward
