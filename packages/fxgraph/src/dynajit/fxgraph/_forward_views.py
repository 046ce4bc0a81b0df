"""A training forward returns no views: AOT autograd's outputs are eager's fresh tensors or its own aliases.

A training forward runs inside an ``autograd.Function``, which marks each view it returns (a backend's output
laid out as a view of its own buffer, ``x.t_()`` of an intermediate) as made inside a custom function:
autograd then refuses the caller's later in-place op on it (``y.unsqueeze_(0)`` after a graph break), which
eager allows on the fresh tensor it returned. Detached, such an output keeps its memory and layout without
being a view; AOT autograd rebuilds the outputs that alias inputs or one another from them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

__all__ = ["returning_no_views"]


def returning_no_views(fw_compiler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an AOT autograd forward compiler so the compiled forward (boxed) returns its views detached."""

    def compile_forward(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        compiled = fw_compiler(graph_module, example_inputs)
        boxed = getattr(compiled, "_boxed_call", False)

        def run(args: list[Any]) -> list[Any]:
            outs = compiled(args) if boxed else compiled(*args)
            return [o.detach() if isinstance(o, torch.Tensor) and o._is_view() else o for o in outs]

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return compile_forward
