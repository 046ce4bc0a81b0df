"""The built-in debugging backends, declared through api's own ``dynajit.backends`` entry points.

``eager`` runs the captured graph as-is (it checks capture alone);
``aot_eager`` also runs AOT autograd over it (it checks the backward graph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["aot_eager", "eager"]


def eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Return the graph module's own ``forward``: the captured ops run eagerly."""
    return gm.forward


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
    """Trace forward and backward with AOT autograd and run both graphs eagerly."""
    from functorch.compile import aot_module_simplified, make_boxed_func

    def run_graph_as_is(graph: torch.fx.GraphModule, _inputs: Any) -> Callable[..., Any]:
        return make_boxed_func(graph.forward)

    return aot_module_simplified(gm, example_inputs, fw_compiler=run_graph_as_is, bw_compiler=run_graph_as_is)


eager._dynajit_backend_tags = ("debug",)  # type: ignore[attr-defined]
aot_eager._dynajit_backend_tags = ("debug",)  # type: ignore[attr-defined]
