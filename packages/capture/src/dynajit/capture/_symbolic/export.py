"""The export graph: one GraphModule taking the function's own arguments and returning its output structure.

The captured graph's inputs are reached from the arguments through their paths
(``xs[0]`` becomes a getitem node, ``self.w`` a getattr node); values reached
from globals or closures are attached as attributes. The return value is rebuilt
from graph outputs and constants.
"""

from __future__ import annotations

import operator
import types
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.paths import Attr, Item, Local, Path
from dynajit.capture._symbolic.variables import VT, ConstVar, DictVar, ListVar, TensorVar, TupleVar, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.tracer import RootTracer
    from dynajit.capture._symbolic.transform import Transformed

__all__ = ["export_graph"]


def export_graph(
    fn: types.FunctionType, tracer: RootTracer, output: OutputGraph, transformed: Transformed, n_bound: int = 0
) -> torch.fx.GraphModule:
    if output.side_effects:
        # The graph computes on tensors; what the function writes into Python objects would be lost.
        written = ", ".join(output.side_effects.describe())
        unsupported(f"the function writes Python state ({written}), which an exported graph cannot write")
    code = fn.__code__
    n_args = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    graph = torch.fx.Graph()
    root = transformed.graphs[0].graph_module if transformed.graphs else torch.nn.Module()
    names = list(code.co_varnames[:n_args])
    # A module's forward (or an object's bound method) is exported as it is called: without the ``n_bound``
    # arguments bound to it, whatever their names, whose tensors the graph holds as attributes.
    args = {name: graph.placeholder(name) for name in names[n_bound:]}
    attrs: dict[str, Any] = {}

    def reach(path: Path, value: Any) -> torch.fx.Node:
        if _reachable(path, args):
            if isinstance(path, Local):
                return args[path.local]
            if isinstance(path, Item):
                return graph.call_function(operator.getitem, (reach(path.base, None), path.key))
            if isinstance(path, Attr):
                return graph.call_function(getattr, (reach(path.base, None), path.attr))
        name = f"_exported_{len(attrs)}"
        attrs[name] = value
        return graph.get_attr(name)

    val_map: dict[torch.fx.Node, Any] = {}
    outputs: Any = ()
    if transformed.graphs:
        traced = transformed.graphs[0].graph_module.graph
        placeholders = [n for n in traced.nodes if n.op == "placeholder"]
        for node, (path, value, _) in zip(placeholders, output.inputs):
            val_map[node] = reach(path, value)
        outputs = graph.graph_copy(traced, val_map)
    index = {tv.node: i for i, tv in enumerate(_outputs_of(transformed, output))}

    def rebuild(vt: VT) -> Any:
        if isinstance(vt, TensorVar):
            if vt.node in index:
                return outputs[index[vt.node]]
            if vt.node in val_map:
                return val_map[vt.node]
            if vt.source is not None:
                real = next((value for _, value, tv in output.inputs if tv.node is vt.node), None)
                if real is None:
                    unsupported("the exported function returns a module parameter; return a computation of it")
                return reach(vt.source, real)
            unsupported("the exported function returns a tensor the graph does not produce")
        if isinstance(vt, (TupleVar, ListVar)):
            return vt.kind(rebuild(item) for item in vt.items)
        if isinstance(vt, DictVar):
            return {k: rebuild(v) for k, v in vt.items.items()}
        if isinstance(vt, ConstVar) or vt.is_const():
            return vt.const()
        unsupported(f"the exported function returns {vt}, which a graph cannot return")

    assert tracer.result is not None
    graph.output(rebuild(tracer.result))
    holder = torch.nn.Module()
    for key, child in dict(root.named_children()).items():
        holder.add_module(key, child)
    for key, value in root.__dict__.get("_parameters", {}).items():
        holder.register_parameter(key, value)
    for key, value in root.__dict__.get("_buffers", {}).items():
        holder.register_buffer(key, value)
    for key in [n.target for n in graph.nodes if n.op == "get_attr" and not n.target.startswith("_exported_")]:
        if not _has_path(holder, key):
            _set_path(holder, key, _get_path(root, key))
    for name, value in attrs.items():
        setattr(holder, name, value)
    gm = torch.fx.GraphModule(holder, graph, class_name="ExportedGraphModule")
    return gm


def _outputs_of(transformed: Transformed, output: OutputGraph) -> list[TensorVar]:
    if not transformed.graphs:
        return []
    traced = transformed.graphs[0].graph_module.graph
    out_node = next(n for n in reversed(traced.nodes) if n.op == "output")
    nodes = out_node.args[0]
    return [TensorVar(node, node.meta.get("example_value")) for node in nodes]  # type: ignore[arg-type]


def _reachable(path: Path, args: dict[str, Any]) -> bool:
    while isinstance(path, (Attr, Item)):
        path = path.base
    return isinstance(path, Local) and path.local in args


def _get_path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _has_path(obj: Any, dotted: str) -> bool:
    try:
        _get_path(obj, dotted)
    except AttributeError:
        return False
    return True


def _set_path(obj: Any, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        if not hasattr(obj, part):
            obj.add_module(part, torch.nn.Module())
        obj = getattr(obj, part)
    setattr(obj, last, value)
