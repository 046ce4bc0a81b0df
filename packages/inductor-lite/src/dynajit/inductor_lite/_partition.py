"""Splitting a training graph into forward and backward without saving a value the caller can write into
that eager would not have saved.

AOT autograd's partitioners treat the forward's inputs and outputs as values that cannot change before the
backward runs, and autograd checks that promise with their version counters. Three ways to break it:

- the graph writes into an input (``x.mul_(w)`` on an activation or a buffer): AOT autograd copies the
  written value into the caller's tensor after the forward, so a backward recomputing ``clone(x)`` or
  ``-x`` from the saved input reads the written value and autograd refuses it ("modified by an inplace
  operation") where eager, which saved the value before the write, computes the gradient;
- the min-cut partitioner saves an input to recompute cheap values from it (``x * 1`` before an
  embedding) where eager saved those values: the caller's later in-place op on the input (``x.unsqueeze_(0)``
  at a graph break) then makes the backward raise where eager's does not;
- likewise an output (an embedding's result returned across a graph break, saved to recompute its
  ``sqrt``, which eager saved instead) that the caller then changes in place.

:func:`partition` saves a copy of such a value, made in the forward: it holds the value the forward computed.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from functorch.compile import min_cut_rematerialization_partition
from torch._functorch import config as functorch_config
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils.checkpoint import CheckpointPolicy

from dynajit.fxgraph import has_side_effects, rewrite_spread_gradients
from dynajit.inductor_lite._graph import example_device
from dynajit.inductor_lite._layout import channels_last

__all__ = ["eager_saved_values", "partition", "written_primals"]

aten = torch.ops.aten


def written_primals(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> frozenset[str]:
    """The names AOT autograd gives (``primals_<n>``) to the inputs of ``gm`` that it writes, through any view.

    Found by running ``gm`` once on fresh fake tensors of the inputs' layouts and reading their version
    counters; only graphs with an op that has effects are run. AOT autograd lifts the module's parameters
    and buffers to the first primals.
    """
    if not any(has_side_effects(n) for n in gm.graph.nodes if n.op in ("call_function", "call_method")):
        return frozenset()
    fakes = [v for v in example_inputs if isinstance(v, FakeTensor)]
    mode = fakes[0].fake_mode if fakes else FakeTensorMode()
    state = {**dict(gm.named_parameters(remove_duplicate=False)), **dict(gm.named_buffers(remove_duplicate=False))}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # The module's own tensors (BatchNorm's running statistics) as fakes too: compiling changes nothing.
            fake_state: dict[str, torch.Tensor] = {
                k: v if isinstance(v, FakeTensor) else mode.from_tensor(v) for k, v in state.items()
            }
            with mode:
                fresh = [
                    torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=v.device)
                    if isinstance(v, torch.Tensor) else v
                    for v in example_inputs
                ]  # fmt: skip
                torch.func.functional_call(gm, fake_state, tuple(fresh))
    except Exception:  # a graph the fake run cannot take: only the clones the backward makes are saved as such
        return frozenset()
    lifted = len(state)
    return frozenset(
        f"primals_{lifted + i + 1}" for i, v in enumerate(fresh) if isinstance(v, torch.Tensor) and v._version > 0
    )


def eager_saved_values(joint: torch.fx.GraphModule) -> frozenset[str]:
    """The joint graph's forward values (inputs and results) that eager's autograd saves too: those its
    backward formulas read directly or through views made in the forward (a saved view shares the value's
    version counter)."""
    backward = {n for n in joint.graph.nodes if n.meta.get("partitioner_tag") == "is_backward"}
    saved: set[str] = set()
    for node in joint.graph.nodes:
        if node in backward or node.op == "output":
            continue
        pending, seen = [node], set()
        while pending:
            value = pending.pop()
            for user in value.users:
                if user in backward:
                    saved.add(node.name)
                elif getattr(user.target, "is_view", False) and user not in seen:
                    seen.add(user)
                    pending.append(user)
    return frozenset(saved)


def _save_what_eager_saves_after_outputs(
    joint: torch.fx.GraphModule, num_fwd_outputs: int, saved: frozenset[str]
) -> None:
    """Mark as saved (``MUST_SAVE``) the values eager saves that the forward computes from its outputs.

    The min-cut partitioner would rather save an output and recompute them (the logits, for the log-softmax a
    loss saved): the caller may change the output in place before the backward, which eager's backward
    never reads, so the compiled one would raise or read the change.
    """
    results = list(joint.graph.output_node().args[0])  # type: ignore[arg-type]
    outputs = [r for r in results[:num_fwd_outputs] if isinstance(r, torch.fx.Node) and r.op == "call_function"]
    pending, seen = list(outputs), set(outputs)
    while pending:
        for user in pending.pop().users:
            if user.meta.get("partitioner_tag") == "is_backward" or user.op != "call_function" or user in seen:
                continue
            seen.add(user)
            pending.append(user)
            if user.name in saved:
                user.meta["recompute"] = CheckpointPolicy.MUST_SAVE


# Backward ops that test forward values for exact (in)equality: the gradients of max/min-like reductions
# spread over the elements equal to the result.
_EXACT_COMPARISONS = frozenset({aten.eq.Tensor, aten.eq.Scalar, aten.ne.Tensor, aten.ne.Scalar})


def _save_exactly_compared_values(joint: torch.fx.GraphModule) -> None:
    """Mark as saved (``MUST_SAVE``) the forward values the backward compares for exact equality.

    ``amin``'s gradient goes to the elements equal to the result, found by comparing the reduced values with
    it. Recomputed in the backward, those values come out of another kernel, whose vector and scalar loops
    may round a transcendental function differently from the forward's: no element then equals the result,
    and the gradient is lost (NaN, from dividing by a count of zero). Saved, they are the values the forward
    reduced.
    """
    for node in joint.graph.nodes:
        if node.target not in _EXACT_COMPARISONS or node.meta.get("partitioner_tag") != "is_backward":
            continue
        pending = [a for a in node.args if isinstance(a, torch.fx.Node)]
        while pending:
            value = pending.pop()
            if value.meta.get("partitioner_tag") == "is_backward":
                if getattr(value.target, "is_view", False) or value.target is aten.expand.default:
                    pending.extend(a for a in value.args if isinstance(a, torch.fx.Node))
            elif value.op == "call_function":
                value.meta["recompute"] = CheckpointPolicy.MUST_SAVE


def partition(
    joint: torch.fx.GraphModule,
    joint_inputs: Any,
    *,
    num_fwd_outputs: int,
    written: Callable[[], frozenset[str]] = frozenset,
    layout: bool = False,
    **options: Any,
) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
    """The min-cut split of ``joint``, with each saved input that the graph writes into (``written()``, asked
    only when an input is saved) or that the backward only clones, and each saved input or output that eager
    would not have saved, replaced by a copy made in the forward."""
    if layout:
        joint = channels_last(joint, example_device(joint_inputs), training=True) or joint
    rewrite_spread_gradients(joint)  # while the backward computes its masks: saving compared values moves them
    eager_saved = eager_saved_values(joint)  # read before splitting: the partitioner may retag nodes
    _save_what_eager_saves_after_outputs(joint, num_fwd_outputs, eager_saved)
    _save_exactly_compared_values(joint)
    # Views are recomputed in the backward from their saved bases: a weight is saved as itself, not as its
    # transpose returned through an alias each step, and several views of one value cost one saved tensor.
    with functorch_config.patch(recompute_views=True):
        forward, backward = min_cut_rematerialization_partition(
            joint, joint_inputs, num_fwd_outputs=num_fwd_outputs, **options
        )
    output = forward.graph.output_node()
    results = list(output.args[0])
    # What the caller can write into before the backward runs: the graph's inputs and its outputs.
    visible = {r.name for r in results[:num_fwd_outputs] if isinstance(r, torch.fx.Node)}
    saved_visible = {
        r.name
        for r in results[num_fwd_outputs:]
        if isinstance(r, torch.fx.Node)
        and (r.op == "placeholder" or r.name in visible)
        and isinstance(r.meta.get("val"), torch.Tensor)
    }
    if not saved_visible:
        return forward, backward
    cloned = {
        node.args[0].name
        for node in backward.graph.nodes
        if node.target is aten.clone.default and getattr(node.args[0], "op", None) == "placeholder"
    }
    copied = cloned | (saved_visible - eager_saved) | written()
    placeholders = [n for n in forward.graph.nodes if n.op == "placeholder"]
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for i in range(num_fwd_outputs, len(results)):
        saved = results[i]
        if not isinstance(saved, torch.fx.Node) or saved.name not in copied or saved.name not in saved_visible:
            continue
        if saved not in copies:
            with forward.graph.inserting_after(placeholders[-1] if saved.op == "placeholder" else saved):
                copies[saved] = forward.graph.call_function(aten.clone.default, (saved,))
            value = saved.meta.get("val")
            if isinstance(value, torch.Tensor):
                with getattr(value, "fake_mode", None) or contextlib.nullcontext():
                    copies[saved].meta["val"] = aten.clone.default(value)
        results[i] = copies[saved]
    if copies:
        output.args = (tuple(results),)
        forward.recompile()
        # The backward now receives the copy: its placeholder says so (a clone of a strided input is dense).
        saved_copies = {saved.name: copy for saved, copy in copies.items()}
        for node in backward.graph.nodes:
            if node.op == "placeholder" and node.name in saved_copies and "val" in saved_copies[node.name].meta:
                node.meta["val"] = saved_copies[node.name].meta["val"]
    return forward, backward
