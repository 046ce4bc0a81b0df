"""Outputs that are dtype views of views reach AOT autograd as their source, and are viewed again at each call.

AOT autograd rebuilds an output that aliases another output by replaying the view functions functionalization
recorded for it. For a dtype view of a view (``w = x.clone().mT.view(torch.int32)``, returned beside the
``mT`` view), that record replays the first view a second time, onto the other output: the shape comes out
wrong and AOT autograd's own check raises at every call (fuzz a234:1837; torch.compile's ``aot_eager`` raises
the same). :func:`dtype_views_from_sources` gives AOT autograd a graph that returns the dtype view's source in
its place, and a wrapper that takes the dtype view of what comes back, as eager's code does.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph._view_bits import _value, mending_outputs

__all__ = ["dtype_views_from_sources"]


def _dtype_view(node: Any) -> tuple[torch.fx.Node, torch.dtype] | None:
    """``node``'s source and dtype when it is ``source.view(dtype)``, else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    is_view = (node.op == "call_method" and node.target == "view") or (
        node.op == "call_function" and node.target in (torch.Tensor.view, torch.ops.aten.view.dtype)
    )
    if not is_view or not node.args or not isinstance(node.args[0], torch.fx.Node):
        return None
    dtype = node.kwargs.get("dtype", node.args[1] if len(node.args) == 2 else None)
    return (node.args[0], dtype) if isinstance(dtype, torch.dtype) else None


def _is_view(node: torch.fx.Node) -> bool:
    return isinstance(value := _value(node), torch.Tensor) and value._is_view()


def dtype_views_from_sources(
    gm: torch.fx.GraphModule,
) -> tuple[torch.fx.GraphModule, Callable[[Callable[..., Any]], Callable[..., Any]]]:
    """``gm``, or a copy returning each output that is a dtype view of a view as that view, and the wrapper that
    turns a forward of the returned graph back into ``gm``'s (the identity when nothing was rewritten)."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    values = output.args[0]
    if not isinstance(values, (tuple, list)):  # (a graph of capture's returns a tuple)
        return gm, lambda forward: forward
    rewritten: dict[int, tuple[torch.fx.Node, torch.dtype]] = {}
    for index, node in enumerate(values):
        found = _dtype_view(node)
        if found is not None and _is_view(found[0]):
            rewritten[index] = found
    if not rewritten:
        return gm, lambda forward: forward
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        if node is output:
            outs = [
                env[rewritten[i][0]] if i in rewritten else torch.fx.map_arg(v, env.__getitem__)
                for i, v in enumerate(values)
            ]
            new = graph.output(type(values)(outs))
            new.meta = dict(node.meta)
        else:
            env[node] = graph.node_copy(node, env.__getitem__)
    result = torch.fx.GraphModule(gm, graph, gm.__class__.__name__)
    result.meta = dict(getattr(gm, "meta", {}))
    mends = {i: functools.partial(torch.Tensor.view, dtype=dtype) for i, (_, dtype) in rewritten.items()}
    return result, lambda forward: mending_outputs(forward, mends)
