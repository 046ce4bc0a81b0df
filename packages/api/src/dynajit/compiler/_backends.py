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
    from functorch.compile import aot_module_simplified, default_partition, make_boxed_func

    from dynajit.fxgraph import (
        DECOMPOSED_UNLIKE_EAGER,
        EAGER_BRANCH_KERNELS,
        EAGER_MESSAGE_KERNELS,
        VIEWED_UNLIKE_EAGER,
        batch_norms_in_eager_layout,
        checking_saved_versions,
        dtype_views_from_sources,
        keep_written_strides,
        matching_eager_backward_formulas,
        owning_eager_products,
        python_kernels_replaced,
        recording_saved_versions,
        reporting_reached_outputs,
        restoring_view_bits,
        returning_no_views,
        skipping_zero_tangents,
        spelled_as_calls,
        stashing_conditional_saves,
        viewing_real_layouts,
    )

    def run_graph_as_is(graph: torch.fx.GraphModule, _inputs: Any) -> Callable[..., Any]:
        return make_boxed_func(spelled_as_calls(graph).forward)

    run_forward = viewing_real_layouts(run_graph_as_is)

    inputs = _symbolic_example_inputs(gm, example_inputs) or example_inputs
    # the ops torch decomposes unlike eager before any table is consulted are kept whole, as eager runs them, and
    # the backward formulas that branch on the data take eager's branch
    kept_whole = dict.fromkeys((*DECOMPOSED_UNLIKE_EAGER, *VIEWED_UNLIKE_EAGER))
    traced, viewing_as_dtypes = dtype_views_from_sources(keep_written_strides(batch_norms_in_eager_layout(gm)))
    with python_kernels_replaced({**kept_whole, **EAGER_BRANCH_KERNELS, **EAGER_MESSAGE_KERNELS}):
        forward = aot_module_simplified(
            traced,
            inputs,
            fw_compiler=recording_saved_versions(returning_no_views(run_forward)),
            bw_compiler=matching_eager_backward_formulas(
                skipping_zero_tangents(
                    checking_saved_versions(viewing_real_layouts(run_graph_as_is, inputs_are_callers=False))
                )
            ),
            inference_compiler=run_forward,
            partition_fn=stashing_conditional_saves(default_partition),
        )
    forward = viewing_as_dtypes(forward)
    return reporting_reached_outputs(owning_eager_products(restoring_view_bits(forward, gm), gm))


def _symbolic_example_inputs(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> list[Any] | None:
    """The placeholders' symbolic example values of a dynamic graph (or one reading tensor data), else None.

    Given the real inputs, AOT autograd fakes them afresh with static sizes and turns int inputs into
    constants: the graph would then answer only for the first call's sizes and ints, which nothing guards.
    """
    from dynajit.fxgraph import is_symbolic, reads_data

    values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    if len(values) != len(example_inputs) or not (any(is_symbolic(v) for v in values) or reads_data(gm)):
        return None
    inputs = []
    for value, real in zip(values, example_inputs):
        if value is None or isinstance(value, torch.Tensor) != isinstance(real, torch.Tensor):
            value = real
        elif isinstance(value, torch.Tensor) and value.requires_grad != real.requires_grad:
            value = value.detach().requires_grad_(real.requires_grad)  # the real input says what needs gradients
        inputs.append(value)
    return inputs


eager._dynajit_backend_tags = ("debug",)  # type: ignore[attr-defined]
aot_eager._dynajit_backend_tags = ("debug",)  # type: ignore[attr-defined]
