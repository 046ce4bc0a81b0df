"""Graph passes: dead-code elimination, common-subexpression elimination, constant folding, statistics.

Each pass edits a ``GraphModule`` in place, recompiles it, and returns how
many nodes it removed or replaced. None of them drops, merges or
pre-computes a node with an observable effect (see :mod:`._targets`).
"""

from __future__ import annotations

import collections
import struct
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph._builder import map_nodes
from dynajit.fxgraph._meta import EXAMPLE_VALUE, copy_source_meta
from dynajit.fxgraph._targets import has_side_effects, mutates, target_name

__all__ = ["GraphStats", "eliminate_common_subexpressions", "eliminate_dead_code", "fold_constants", "graph_stats"]


def _require_graph_module(gm: Any, pass_name: str) -> torch.fx.GraphModule:
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError(f"{pass_name} takes a torch.fx.GraphModule, got {type(gm).__name__}")
    return gm


def _finish(gm: torch.fx.GraphModule, changed: int) -> int:
    if changed:
        gm.graph.lint()
        gm.recompile()
    return changed


def eliminate_dead_code(gm: torch.fx.GraphModule) -> int:
    """Remove nodes whose results are unused and that have no side effects; return how many went."""
    _require_graph_module(gm, "eliminate_dead_code")
    removed = 0
    for node in reversed(list(gm.graph.nodes)):
        if not node.users and not has_side_effects(node):
            gm.graph.erase_node(node)
            removed += 1
    return _finish(gm, removed)


def _hashable(value: Any) -> Hashable:
    """A key equal for equal arguments: nodes by identity, containers by content, tagged by type."""
    if isinstance(value, torch.fx.Node):
        return value
    if isinstance(value, tuple | list):
        return (type(value).__name__, tuple(_hashable(item) for item in value))
    if isinstance(value, dict):
        return ("dict", tuple((key, _hashable(item)) for key, item in value.items()))
    if isinstance(value, slice):
        return ("slice", _hashable(value.start), _hashable(value.stop), _hashable(value.step))
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value))
    if isinstance(value, float | complex):
        # 0.0 == -0.0 with one hash, but x * -0.0 is not x * 0.0; NaN is unequal to itself, but one op of NaN
        # gives what the same op gives: floats are keyed by their bits.
        parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
        return (type(value), struct.pack(f">{len(parts)}d", *parts))
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    # 1 == 1.0 == True, but they are different arguments to an op.
    return (type(value), value)


def eliminate_common_subexpressions(gm: torch.fx.GraphModule) -> int:
    """Replace a node by an earlier identical one (same op, target and arguments); return how many went.

    Nodes with side effects are never merged, and a mutating node ends every
    earlier match, since the values it could have changed must be recomputed.
    """
    _require_graph_module(gm, "eliminate_common_subexpressions")
    seen: dict[Hashable, torch.fx.Node] = {}
    merged = 0
    for node in list(gm.graph.nodes):
        if node.op not in ("call_function", "call_method", "get_attr"):
            if mutates(node) and node.op != "placeholder":
                seen.clear()
            continue
        if has_side_effects(node):
            if mutates(node):
                seen.clear()
            continue
        key = (node.op, _hashable(node.target), _hashable(node.args), _hashable(node.kwargs))
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = node
            continue
        copy_source_meta(node, earlier)
        node.replace_all_uses_with(earlier)
        gm.graph.erase_node(node)
        merged += 1
    return _finish(gm, merged)


def _constant_attr(gm: torch.fx.GraphModule, node: torch.fx.Node) -> Any:
    """The value of a ``get_attr`` node when it is a constant: a tensor that is no parameter and needs no grad."""
    owner_path, _, attr = str(node.target).rpartition(".")
    found = getattr(gm.get_submodule(owner_path), attr, None)
    if isinstance(found, torch.Tensor) and not isinstance(found, torch.nn.Parameter) and not found.requires_grad:
        return found
    return _NOT_CONSTANT


_NOT_CONSTANT: Any = object()
_LITERALS = (int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.Size)

#: Calls whose result may share memory with their first argument, when the graph has no example values to ask.
VIEW_NAMES: frozenset[str] = frozenset(
    {"view", "view_as", "reshape", "reshape_as", "t", "transpose", "permute", "expand", "expand_as", "narrow"}
    | {"select", "squeeze", "unsqueeze", "flatten", "unflatten", "getitem", "as_strided", "detach", "alias"}
    | {"split", "chunk", "unbind", "movedim", "diagonal", "unfold", "contiguous", "to", "type_as", "real", "imag"}
)


def _may_alias_input(node: torch.fx.Node) -> bool:
    """True when ``node``'s result may be a view of one of its inputs."""
    example = node.meta.get(EXAMPLE_VALUE)
    if isinstance(example, torch.Tensor):
        return example._is_view()
    return node.op == "output" or target_name(node.target).rpartition(".")[2] in VIEW_NAMES


def _run_on_constants(node: torch.fx.Node, values: dict[torch.fx.Node, Any]) -> Any:
    args, kwargs = map_nodes((node.args, node.kwargs), values.__getitem__)
    if node.op == "call_method":
        return getattr(args[0], str(node.target))(*args[1:], **kwargs)
    return node.target(*args, **kwargs)  # type: ignore[operator]


def _evaluate_constants(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, Any]:
    """Every node whose value is known before the graph runs, with that value."""
    mutated = {arg for node in gm.graph.nodes if mutates(node) for arg in node.all_input_nodes}
    values: dict[torch.fx.Node, Any] = {}
    for node in gm.graph.nodes:
        if node in mutated:
            continue
        if node.op == "get_attr":
            value = _constant_attr(gm, node)
            if value is not _NOT_CONSTANT:
                values[node] = value
        elif node.op in ("call_function", "call_method") and not has_side_effects(node):
            if all(arg in values for arg in node.all_input_nodes):
                try:
                    with torch.no_grad():
                        values[node] = _run_on_constants(node, values)
                except Exception:  # the op fails at run time too, where the user sees the error
                    continue
    return values


def _materializable(node: torch.fx.Node, value: Any, known: dict[torch.fx.Node, Any]) -> bool:
    """A constant can stand in for ``node`` unless a run-time user could alias or hand it out (then mutate it)."""
    if isinstance(value, _LITERALS):
        return True
    if not isinstance(value, torch.Tensor):
        return False
    return not any(_may_alias_input(user) for user in node.users if user not in known)


def fold_constants(gm: torch.fx.GraphModule) -> int:
    """Pre-compute calls whose inputs are all constants; return how many nodes were folded or removed.

    Constants are literals and ``get_attr`` tensors that are neither
    parameters nor requiring grad (parameters change while training). A
    folded tensor that the rest of the graph reads becomes a buffer
    ``_folded_constant_<n>`` read by a ``get_attr`` node; a folded scalar is
    written into its users' arguments. Nothing mutated by the graph, random
    or side-effecting is folded; nothing returned or viewed by a run-time op
    is folded (the caller could mutate it and change later calls); a call
    that raises is left for run time to raise.
    """
    _require_graph_module(gm, "fold_constants")
    known = _evaluate_constants(gm)
    # Shrink until every constant with a run-time user can be materialized.
    while True:
        blocked = [
            node
            for node, value in known.items()
            if node.op != "get_attr"
            and any(u not in known for u in node.users)
            and not _materializable(node, value, known)
        ]
        if not blocked:
            break
        for node in blocked:
            del known[node]
    folded = 0
    for node, value in known.items():
        if node.op == "get_attr" or not any(user not in known for user in node.users):
            continue
        if isinstance(value, torch.Tensor):
            _replace_with_buffer(gm, node, value)
        else:
            _replace_with_literal(node, value)
        folded += 1
    if folded:
        folded += eliminate_dead_code(gm)
    return _finish(gm, folded)


def _replace_with_literal(node: torch.fx.Node, value: Any) -> None:
    for user in list(node.users):
        user.args, user.kwargs = map_nodes((user.args, user.kwargs), lambda arg: value if arg is node else arg)
    node.graph.erase_node(node)


def _replace_with_buffer(gm: torch.fx.GraphModule, node: torch.fx.Node, value: torch.Tensor) -> torch.fx.Node:
    index = 0
    while hasattr(gm, f"_folded_constant_{index}"):
        index += 1
    name = f"_folded_constant_{index}"
    gm.register_buffer(name, value)
    with gm.graph.inserting_before(node):
        constant = gm.graph.get_attr(name)
    constant.meta.update(node.meta)
    node.replace_all_uses_with(constant)
    gm.graph.erase_node(node)
    return constant


@dataclass
class GraphStats:
    """How many nodes a graph has, by opcode and by call target."""

    by_op: dict[str, int] = field(default_factory=dict)
    by_target: dict[str, int] = field(default_factory=dict)

    @property
    def nodes(self) -> int:
        """All nodes, placeholders and output included."""
        return sum(self.by_op.values())

    @property
    def calls(self) -> int:
        """Nodes that call something: functions, methods and modules."""
        return sum(self.by_op.get(op, 0) for op in ("call_function", "call_method", "call_module"))

    def __str__(self) -> str:
        ops = ", ".join(f"{op}={count}" for op, count in self.by_op.items())
        return f"{self.nodes} nodes ({ops})"


def graph_stats(graph_or_module: torch.fx.Graph | torch.fx.GraphModule) -> GraphStats:
    """Count nodes per opcode (``call_function``, ``placeholder``, ...) and per call target (``torch.relu``, ...)."""
    graph = graph_or_module.graph if isinstance(graph_or_module, torch.fx.GraphModule) else graph_or_module
    if not isinstance(graph, torch.fx.Graph):
        raise TypeError(f"graph_stats takes a torch.fx.Graph or GraphModule, got {type(graph_or_module).__name__}")
    by_op: collections.Counter[str] = collections.Counter()
    by_target: collections.Counter[str] = collections.Counter()
    for node in graph.nodes:
        by_op[node.op] += 1
        if node.op.startswith("call_"):
            by_target[target_name(node.target)] += 1
    return GraphStats(dict(by_op), dict(by_target))
