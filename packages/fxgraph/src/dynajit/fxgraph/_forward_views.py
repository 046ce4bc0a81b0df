"""A training forward returns no views: AOT autograd's outputs are eager's fresh tensors or its own aliases.

A training forward runs inside an ``autograd.Function``, which marks each view it returns (a backend's output
laid out as a view of its own buffer, ``x.t_()`` of an intermediate) as made inside a custom function:
autograd then refuses the caller's later in-place op on it (``y.unsqueeze_(0)`` after a graph break), which
eager allows on the fresh tensor it returned. Detached, such an output keeps its memory and layout without
being a view; AOT autograd rebuilds the outputs that alias inputs or one another from them. The tensors
the forward returns after those, to save for the backward, never reach the caller and stay as they are (a
split's forward says how many it returns first in its meta).

AOT autograd rebuilds an output that aliases an intermediate by replaying the views functionalization recorded
for it; after an in-place write through a dtype view of another view (``x.mT.view(torch.int32).add_(1)``) the
recorded views lack the ones before the dtype view, and the replay raised "incorrect out shape" at every call
(torch.compile's too). :func:`replaying_views_by_functions` has it rebuild them from autograd's view functions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch._functorch.config
import torch.fx

from dynajit.fxgraph._reached_saves import FORWARD_RETURNS

__all__ = ["replaying_views_by_functions", "returning_no_views"]


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


def replaying_views_by_functions(gm: torch.fx.GraphModule) -> contextlib.AbstractContextManager[Any]:
    """A context within which AOT autograd compiles ``gm`` so it rebuilds each output aliasing an intermediate or
    an input from autograd's view functions (else ``as_strided``), not from functionalization's recorded views,
    when ``gm`` takes a dtype view; elsewhere the recorded views serve (they keep a conjugate view's bits)."""
    if not any(_is_dtype_view(node) for node in gm.graph.nodes):
        return contextlib.nullcontext()
    return torch._functorch.config.patch(view_replay_for_aliased_outputs=False)


def _is_dtype_view(node: torch.fx.Node) -> bool:
    if (node.op == "call_method" and node.target == "view") or (
        node.op == "call_function"
        and node.target
        in (
            torch.Tensor.view,
            torch.ops.aten.view.dtype,
        )
    ):
        return any(isinstance(arg, torch.dtype) for arg in (*node.args, *node.kwargs.values()))
    return False
