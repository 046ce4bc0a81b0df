"""Compiling a graph that runs under ``torch.inference_mode`` as one that runs under ``no_grad``.

AOT autograd traced under inference mode wraps its inputs in functional tensors made in that mode: inference
tensors, which never require grad. An output viewing an input that requires grad (``x.squeeze()`` of a
parameter) then comes back not requiring it, where eager's view does. Inference mode is ``no_grad`` plus
bookkeeping a compiled graph has no use for (no version counters, no view tracking), so backends compile in
``no_grad`` instead, with inference tensors among the example inputs seen as normal ones (an in-place op on
one is allowed at run time, under inference mode, but not in ``no_grad``). The compiled code still runs
under inference mode: its new tensors are inference tensors, as eager's are.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch._subclasses import meta_utils

__all__ = ["compiling_outside_inference_mode"]


@contextlib.contextmanager
def compiling_outside_inference_mode(gm: torch.fx.GraphModule | None = None) -> Iterator[None]:
    """Under inference mode, run the block in ``no_grad`` with inference mode off; otherwise do nothing.

    Inside, fake tensors made of real inference tensors are normal ones, and so are ``gm``'s placeholders'
    example values while the block runs (they are put back after it).
    """
    if not torch.is_inference_mode_enabled():
        yield
        return
    swapped = [] if gm is None else _normal_placeholders(gm)
    try:
        with torch.inference_mode(False), torch.no_grad(), meta_utils.disable_inference_mode_for_fake_prop():
            yield
    finally:
        for node, key, value in swapped:
            node.meta[key] = value


def _normal_placeholders(gm: torch.fx.GraphModule) -> list[tuple[torch.fx.Node, str, torch.Tensor]]:
    """Give each placeholder whose fake example value is an inference tensor a normal twin; return the originals."""
    swapped: list[tuple[torch.fx.Node, str, torch.Tensor]] = []
    twins: dict[int, torch.Tensor] = {}
    for node in gm.graph.find_nodes(op="placeholder"):
        for key in ("example_value", "val"):
            value = node.meta.get(key)
            if not (isinstance(value, torch._subclasses.FakeTensor) and value.is_inference()):
                continue
            if value.storage_offset() != 0:
                continue  # left as it is: AOT autograd then refuses an in-place op on it, loudly
            twin = twins.get(id(value))
            if twin is None:
                with value.fake_mode, torch.inference_mode(False):
                    twin = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=value.device)
                    twin.requires_grad_(value.requires_grad)
                twins[id(value)] = twin
            swapped.append((node, key, value))
            node.meta[key] = twin
    return swapped
