"""A saved tensor's version is checked when the backward reads it, as eager checks the nodes it reaches.

Eager's autograd checks a saved tensor's version counter only when the backward reaches the node that saved
it: ``s = x.max(); relu_(x)`` then a backward from another output never looks at the ``x`` that ``max``
saved. A compiled training graph is a single autograd node that saves, through ``save_for_backward``, every
tensor any of its outputs' gradients needs, so the same program's backward raised "modified by an inplace
operation" where eager computes; the caller can write into the graph's inputs and into its outputs.

The tensors a graph saves only for some of its outputs' gradients (found by pruning the backward for each
tangent alone) are instead stashed without autograd's check: :func:`stashing_conditional_saves` moves them to
the end of the split's saved tensors and marks them with AOT autograd's ``saved_tensor_with_no_vc_check`` meta
(the ``ctx.x = x`` case of custom functions), :func:`recording_saved_versions` records their versions at the
forward, all on one alias of the first (or, under ``saved_tensors_hooks``, saves each as what the pack hook made
of it), and
:func:`checking_saved_versions` restores and checks those that the backward compiled for the call's tangents
reads.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph._zero_tangents import prune_zero_tangents

__all__ = [
    "FORWARD_RETURNS",
    "checking_saved_versions",
    "conditionally_saved",
    "recording_saved_versions",
    "stashing_conditional_saves",
]

_UNCHECKED = "saved_tensor_with_no_vc_check"  # AOT autograd's meta key: stashed on ctx, not save_for_backward
FORWARD_RETURNS = "dynajit_forward_returns"  # forward.meta: how many outputs precede the saved tensors
_POSITIONS = "dynajit_unchecked_saves"  # forward.meta: where those tensors sit among the forward's outputs
_VERSIONS = "_dynajit_saved_versions"  # on the first stashed tensor's alias: every stashed tensor's version
_PACKED = "_dynajit_packed"


# Ops that read only their tensor argument's layout: a placeholder reached only through them is not read.
_LAYOUT_ONLY = {
    torch.ops.aten.zeros_like.default, torch.ops.aten.empty_like.default, torch.ops.aten.sym_size.int,
    torch.ops.aten.sym_stride.int, torch.ops.aten.sym_numel.default,
}  # fmt: skip


def data_reads(graph_module: torch.fx.GraphModule) -> frozenset[str]:
    """The placeholders whose values the graph's outputs depend on (a zero made as ``zeros_like`` of a
    computation from a saved tensor reads only that computation's layout, not the tensor)."""
    live: set[torch.fx.Node] = set()
    pending = [graph_module.graph.output_node()]
    while pending:
        node = pending.pop()
        if node in live:
            continue
        live.add(node)
        if node.op == "call_function" and node.target in _LAYOUT_ONLY:
            continue
        pending.extend(node.all_input_nodes)
    return frozenset(n.name for n in live if n.op == "placeholder")


def conditionally_saved(backward: torch.fx.GraphModule) -> frozenset[str]:
    """The saved tensors that the ``backward`` graph reads for some of its tangents only."""
    placeholders = [n for n in backward.graph.nodes if n.op == "placeholder"]
    tangents = frozenset(n.name for n in placeholders if n.name.startswith("tangents"))
    saved = {
        n.name
        for n in placeholders
        if n.name not in tangents and n.users and isinstance(n.meta.get("val"), torch.Tensor)
    }
    if len(tangents) < 2 or not saved:
        return frozenset()
    conditional: set[str] = set()
    for kept in tangents:
        pruned = prune_zero_tangents(backward, tangents - {kept})
        conditional |= saved - data_reads(pruned)
    return frozenset(conditional)


def stashing_conditional_saves(partition_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap an AOT autograd ``partition_fn`` so the tensors saved for some outputs' gradients only are stashed
    unchecked: moved to the end of the saved tensors and marked as AOT autograd's partitioner marks them, with
    their positions among the forward's outputs in ``forward.meta``."""

    def partition(joint: torch.fx.GraphModule, joint_inputs: Any, **options: Any) -> Any:
        _unpack_unused_results(joint)
        forward, backward = partition_fn(joint, joint_inputs, **options)
        forward.meta[FORWARD_RETURNS] = options["num_fwd_outputs"]
        marked = conditionally_saved(backward)
        if marked:
            _stash_last(forward, backward, options["num_fwd_outputs"], marked)
        return forward, backward

    return partition


def _unpack_unused_results(joint: torch.fx.GraphModule) -> None:
    """Give an op whose results nothing reads, and which returns several, a read of its first.

    AOT autograd keeps such an op in the joint graph when its schema may draw random numbers (attention's
    dropout), and its default partitioner then takes it for a tensor, which it is not: the read makes it the
    multi-output op the partitioner knows, which it leaves out of the forward as it does any unused value.
    """
    for node in list(joint.graph.nodes):
        value = node.meta.get("val")
        if node.op == "call_function" and not node.users and isinstance(value, (tuple, list)) and value:
            with joint.graph.inserting_after(node):
                first = joint.graph.call_function(operator.getitem, (node, 0))
            first.meta["val"] = value[0]


def _stash_last(
    forward: torch.fx.GraphModule, backward: torch.fx.GraphModule, num_fwd_outputs: int, marked: frozenset[str]
) -> None:
    """Reorder the saved tensors of a split so those the backward names in ``marked`` come last, in the
    forward's outputs and the backward's placeholders alike, and mark them unchecked in both.

    The forward returns its outputs, then the saved tensors, then the saved sizes; the backward takes the
    saved sizes, then the saved tensors in the same order, then the tangents. AOT autograd stashes the
    last saved tensors its meta marks on ``ctx`` rather than through ``save_for_backward``.
    """
    output = forward.graph.output_node()
    results = list(output.args[0])  # type: ignore[arg-type]
    saved = results[num_fwd_outputs:]
    tensors = 0
    while tensors < len(saved) and isinstance(getattr(saved[tensors], "meta", {}).get("val"), torch.Tensor):
        tensors += 1
    sizes = len(saved) - tensors
    placeholders = [n for n in backward.graph.nodes if n.op == "placeholder"]
    block = placeholders[sizes : sizes + tensors]
    moved = [i for i, p in enumerate(block) if p.name in marked]
    if not moved or len(block) != tensors:
        return
    order = [i for i in range(tensors) if i not in moved] + moved
    output.args = (tuple([*results[:num_fwd_outputs], *(saved[i] for i in order), *saved[tensors:]]),)
    for i in moved:
        saved[i].meta[_UNCHECKED] = True
        block[i].meta[_UNCHECKED] = True
    anchor = block[0].prev
    for i in order:  # the backward's placeholders, in the new order
        anchor.append(block[i])
        anchor = block[i]
    forward.recompile()
    backward.recompile()
    forward.meta[_POSITIONS] = tuple(num_fwd_outputs + tensors - len(moved) + k for k in range(len(moved)))


def _packed(value: Any, hooks: tuple[Callable[..., Any], Callable[..., Any]]) -> Any:
    """What save_for_backward would have done under ``saved_tensors_hooks``: the pack hook's result is kept, the
    tensor is not."""
    if not isinstance(value, torch.Tensor):
        return value
    holder = value.new_empty(0)
    setattr(holder, _PACKED, (hooks[0](value), hooks[1]))
    return holder


def _stash_versions(outs: list[Any], positions: Sequence[int], returns: int) -> None:
    """Record the stashed tensors' versions at the forward, all on one alias of the first of them.

    One alias, not one per tensor: a decoder's graph stashes dozens, and an alias each (with its attribute) cost
    more per step than the rest of the stash. Aliases share the version counter, and the caller's tensors get no
    attribute; a stashed tensor that is also one of the graph's returns is stashed as an alias too, so the
    function's context never holds a tensor whose history is that function (a reference cycle).
    """
    returned = {id(t) for t in outs[:returns]}
    versions = []
    for i in positions:
        value = outs[i]
        versions.append(value._version if isinstance(value, torch.Tensor) else None)
        if id(value) in returned:
            outs[i] = value.detach()
    first = outs[positions[0]]
    if isinstance(first, torch.Tensor):
        outs[positions[0]] = carrier = first.detach()
        setattr(carrier, _VERSIONS, tuple(versions))


def recording_saved_versions(fw_compiler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a forward compiler so the versions of the unchecked saved tensors :func:`stashing_conditional_saves`
    placed are recorded (or the tensors packed by the active ``saved_tensors_hooks``)."""

    def compile_forward(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        compiled = fw_compiler(graph_module, example_inputs)
        positions = graph_module.meta.get(_POSITIONS)
        if not positions:
            return compiled
        boxed = getattr(compiled, "_boxed_call", False)
        returns = graph_module.meta.get(FORWARD_RETURNS, 0)

        def run(args: list[Any]) -> Any:
            outs = list(compiled(args) if boxed else compiled(*args))
            hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
            if hooks is not None:
                for i in positions:
                    outs[i] = _packed(outs[i], hooks)
            else:
                _stash_versions(outs, positions, returns)
            return outs

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return compile_forward


def checking_saved_versions(bw_compiler: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a boxed backward compiler so each compiled backward first restores the stashed tensors it reads
    (unpacking the packed ones) and raises eager's error for one written in place since the forward."""

    def compile_backward(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        compiled = bw_compiler(graph_module, example_inputs)
        placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
        read = data_reads(graph_module)
        stashed = [i for i, n in enumerate(placeholders) if n.meta.get(_UNCHECKED)]
        # Each stashed tensor the graph uses is restored; only those whose values it reads are checked.
        used = [(k, i, placeholders[i].name in read) for k, i in enumerate(stashed) if placeholders[i].users]
        if not used:
            return compiled

        def run(args: list[Any]) -> Any:
            versions = getattr(args[stashed[0]], _VERSIONS, None)
            if versions is not None:  # recorded by _stash_versions: this call's forward packed nothing
                for k, i, checked in used:
                    if checked and args[i]._version != versions[k]:
                        _raise_modified(args[i], versions[k])
                return compiled(args)
            for _, i, _ in used:
                _unpack(args, i)
            return compiled(args)

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return compile_backward


def _unpack(args: list[Any], i: int) -> None:
    """Unpack the stashed ``args[i]`` if the forward packed it (under ``saved_tensors_hooks``)."""
    packed = getattr(args[i], _PACKED, None)
    if packed is not None:
        args[i] = packed[1](packed[0])


def _raise_modified(value: torch.Tensor, saved: int) -> None:
    raise RuntimeError(
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        f"[{value.type()} {list(value.shape)}] is at version {value._version}; expected version {saved} "
        "instead. Hint: a compiled graph's forward saved it, and it was written in place before the backward "
        "reached it."
    )
