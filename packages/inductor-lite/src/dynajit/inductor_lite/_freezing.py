"""Freezing (option ``freezing``): parameters read as constants, so eval-mode batch norm folds into its convolution.

Capture guards a module's parameters by identity, not by value: an optimizer step changes them in place
without a recompile. Folding a batch norm's scale and shift into the preceding convolution's weight and
bias bakes in the values seen at compile time, which is only sound when the caller promises they no
longer change; that promise is the opt-in ``freezing`` option. The caller's graph is not modified.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["batch_norm_arguments", "fold_conv_batch_norm"]

_CONVS = {torch.conv1d, torch.conv2d, torch.conv3d}
_CONVS |= {torch.nn.functional.conv1d, torch.nn.functional.conv2d, torch.nn.functional.conv3d}
_BATCH_NORMS = {torch.nn.functional.batch_norm}
_BN_NAMES = ("input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps")
_BN_DEFAULTS: dict[str, Any] = {"weight": None, "bias": None, "training": False, "momentum": 0.1, "eps": 1e-5}


def _attr(gm: torch.fx.GraphModule, node: Any) -> torch.Tensor | None:
    """The tensor a ``get_attr`` node reads, None for a literal None; raises LookupError for anything else."""
    if node is None:
        return None
    if isinstance(node, torch.fx.Node) and node.op == "get_attr":
        value = _lookup(gm, str(node.target))
        if isinstance(value, torch.Tensor):
            return value
    raise LookupError(node)


def batch_norm_arguments(node: torch.fx.Node) -> dict[str, Any]:
    """An ``F.batch_norm`` call's arguments by name, its defaults filled in."""
    args: dict[str, Any] = dict(_BN_DEFAULTS)
    args.update(zip(_BN_NAMES, node.args))
    args.update(node.kwargs)
    return args


def _fold(gm: torch.fx.GraphModule, conv: torch.fx.Node, bn: torch.fx.Node) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The folded (weight, bias) of ``conv`` followed by eval-mode ``bn``, or None when they cannot fold."""
    args = batch_norm_arguments(bn)
    if args["input"] is not conv or args["training"] is not False or not isinstance(args["eps"], float):
        return None
    if len(conv.args) < 2 or conv.kwargs.keys() & {"input", "weight", "bias"}:
        return None
    try:
        weight = _attr(gm, conv.args[1])
        bias = _attr(gm, conv.args[2] if len(conv.args) > 2 else None)
        mean, var = _attr(gm, args["running_mean"]), _attr(gm, args["running_var"])
        gamma, beta = _attr(gm, args["weight"]), _attr(gm, args["bias"])
    except LookupError:
        return None
    tensors = [t for t in (weight, bias, mean, var, gamma, beta) if t is not None]
    if weight is None or mean is None or var is None:
        return None
    if weight.dtype not in (torch.float32, torch.float64) or any(t.dtype != weight.dtype for t in tensors):
        return None
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return None  # the graph computes gradients of these: they are not constants
    with torch.no_grad():
        # In float64, so that folding adds no rounding beyond the final cast.
        scale = var.double().add(args["eps"]).rsqrt()
        if gamma is not None:
            scale = scale * gamma.double()
        shift = -mean.double() * scale
        if bias is not None:
            shift = shift + bias.double() * scale
        if beta is not None:
            shift = shift + beta.double()
        folded_weight = weight.double() * scale.reshape(-1, *([1] * (weight.dim() - 1)))
        return folded_weight.to(weight.dtype).contiguous(), shift.to(weight.dtype)


def fold_conv_batch_norm(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with each convolution whose only user is an eval-mode batch norm replaced by one convolution.

    The folded weight and bias are computed now from the parameters' current values (see the module
    docstring for when that is sound). Returns ``gm`` itself when nothing folds.
    """
    folds: list[tuple[torch.fx.Node, torch.fx.Node, torch.Tensor, torch.Tensor]] = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target not in _CONVS or len(node.users) != 1:
            continue
        (user,) = node.users
        if user.op == "call_function" and user.target in _BATCH_NORMS:
            folded = _fold(gm, node, user)
            if folded is not None:
                folds.append((node, user, *folded))
    return _rebuild(gm, folds) if folds else gm


def _rebuild(
    gm: torch.fx.GraphModule, folds: list[tuple[torch.fx.Node, torch.fx.Node, torch.Tensor, torch.Tensor]]
) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose folded convolutions read the folded constants and whose batch norms are gone."""
    root: dict[str, Any] = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            root[node.target] = _lookup(gm, node.target)
        elif node.op == "call_module":
            root[node.target] = gm.get_submodule(node.target)
    graph = torch.fx.Graph()
    remap: dict[torch.fx.Node, torch.fx.Node] = {}
    by_conv = {conv: (bn, w, b) for conv, bn, w, b in folds}
    dropped = {bn: conv for conv, bn, _, _ in folds}
    for node in gm.graph.nodes:
        if node in dropped:
            remap[node] = remap[dropped[node]]
            continue
        if node in by_conv:
            _, w, b = by_conv[node]
            constants = []
            for kind, tensor in (("weight", w), ("bias", b)):
                name = f"_frozen_{kind}_{len(root)}"
                root[name] = tensor
                constants.append(graph.get_attr(name))
            first, *rest = torch.fx.map_arg((node.args[0], *node.args[3:]), lambda n: remap[n])
            kwargs = torch.fx.map_arg(dict(node.kwargs), lambda n: remap[n])
            new = graph.call_function(node.target, (first, *constants, *rest), kwargs)
            new.meta = dict(node.meta)
            remap[node] = new
            continue
        remap[node] = graph.node_copy(node, lambda n: remap[n])
    return torch.fx.GraphModule(root, graph)


def _lookup(gm: torch.fx.GraphModule, target: str) -> Any:
    value: Any = gm
    for part in target.split("."):
        value = getattr(value, part)
    return value
