"""A backward that skips the outputs whose gradient is zero, as eager's autograd skips the ones it never reached.

A compiled graph is one autograd node: its backward runs for every output, and autograd passes zeros for the
outputs the loss did not reach (a value read only by ``.item()``, a statistic kept across a graph break). Eager
never differentiates through those, but the compiled backward multiplies their zeros by derivatives that may be
infinite (``sqrt`` at 0, ``nan_to_num`` of a NaN), and ``0 * inf`` puts NaN into gradients eager computes
cleanly. :func:`skipping_zero_tangents` wraps a backward compiler: a call whose tangents include ones the loss
never reached runs a version of the backward graph where those tangents are structural zeros, propagated through
the ops that are linear in them (products, views, reductions, ``*_backward`` ops in their incoming gradient) and
dropped from sums, so nothing is multiplied by them.

A gradient the loss did reach may be all zeros too (through an empty selection, an empty output, a zero weight),
and eager multiplies that one by its infinite derivatives. The zeros alone cannot tell the two apart, so
:func:`reporting_reached_outputs` wraps the compiled forward: each call registers a pre-hook on the graph's
autograd node, which sees the incoming gradients before autograd fills the missing ones with zeros, and
leaves on the node which tangents those are, for the backward the node runs next. Those are zeros by
construction; a tangent without a report is taken for zero only when it is all zeros.
"""

from __future__ import annotations

import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

__all__ = ["copy_graph", "prune_zero_tangents", "reporting_reached_outputs", "skipping_zero_tangents"]

aten = torch.ops.aten

# Ops whose result is zero when the argument at one of these positions is (elementwise or linear in it).
_LINEAR_IN: dict[Any, tuple[int, ...]] = {
    aten.mul.Tensor: (0, 1), aten.mul.Scalar: (0,), aten.div.Tensor: (0,), aten.div.Scalar: (0,),
    aten.neg.default: (0,), aten.clone.default: (0,), aten.alias.default: (0,), aten.detach.default: (0,),
    aten.view.default: (0,), aten._unsafe_view.default: (0,), aten.reshape.default: (0,),
    aten.expand.default: (0,), aten.permute.default: (0,), aten.t.default: (0,), aten.transpose.int: (0,),
    aten.squeeze.dim: (0,), aten.squeeze.dims: (0,), aten.squeeze.default: (0,), aten.unsqueeze.default: (0,),
    aten.slice.Tensor: (0,), aten.select.int: (0,), aten.sum.dim_IntList: (0,), aten.sum.default: (0,),
    aten.mean.dim: (0,), aten.mean.default: (0,), aten.mm.default: (0, 1), aten.bmm.default: (0, 1),
    aten._to_copy.default: (0,),
    aten.slice_backward.default: (0,), aten.select_backward.default: (0,), aten.expand_copy.default: (0,),
    aten.cumsum.default: (0,), aten.flip.default: (0,), aten.repeat.default: (0,), aten.roll.default: (0,),
    aten.tril.default: (0,), aten.triu.default: (0,), aten.diagonal.default: (0,),
    aten.index.Tensor: (0,), aten._unsafe_index.Tensor: (0,), aten.index_select.default: (0,),
    aten.gather.default: (0,),
    torch.ops.prims.convert_element_type.default: (0,),
    # a complex tensor's parts (the backwards of ``real``, ``imag``, ``conj`` and ``abs`` of one go through them)
    aten.view_as_complex.default: (0,), aten.view_as_real.default: (0,), aten.real.default: (0,),
    aten.imag.default: (0,), aten._conj.default: (0,), aten.conj_physical.default: (0,),
    aten.resolve_conj.default: (0,), aten._neg_view.default: (0,), aten.resolve_neg.default: (0,),
    # views and permutations some backwards keep whole, and the Fourier transforms
    aten.as_strided.default: (0,), aten.rot90.default: (0,), aten.pixel_shuffle.default: (0,),
    aten.pixel_unshuffle.default: (0,), aten.channel_shuffle.default: (0,), aten.native_channel_shuffle.default: (0,),
    aten._fft_c2c.default: (0,), aten._fft_r2c.default: (0,), aten._fft_c2r.default: (0,),
}  # fmt: skip
# Ops that only move, repeat or drop their first argument's elements: zeros stay zeros, whatever else they read
# (``div`` of zeros the graph makes is NaN where the divisor is 0).
_REARRANGING = {
    aten.expand.default, aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.permute.default,
    aten.t.default, aten.transpose.int, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
    aten.unsqueeze.default, aten.slice.Tensor, aten.select.int, aten.clone.default, aten.alias.default,
    aten.as_strided.default, aten.expand_copy.default, aten.repeat.default, aten.flip.default, aten.roll.default,
}  # fmt: skip
_SUMS = {aten.add.Tensor, aten.sub.Tensor}
# A base with a source written into part of it: zero when both are.
_SCATTERS = {aten.select_scatter.default, aten.slice_scatter.default, aten.diagonal_scatter.default,
             aten.as_strided_scatter.default}  # fmt: skip
# A base with values written or added at indices (``gather``'s and ``index_select``'s backwards scatter their
# gradient into zeros this way): the positions of the base and the values, zero when both are.
_INDEXED_WRITES: dict[Any, tuple[int, int]] = {
    aten.scatter_add.default: (0, 3), aten.scatter.src: (0, 3), aten.index_add.default: (0, 3),
    aten.index_copy.default: (0, 3), aten.index_put.default: (0, 2), aten.masked_scatter.default: (0, 2),
    aten.index_fill.int_Tensor: (0, 3),
    aten._unsafe_index_put.default: (0, 2), aten.put.default: (0, 2),
}  # fmt: skip


def _is_backward_op(target: Any) -> bool:
    """``*_backward`` aten ops (``native_layer_norm_backward``, ``threshold_backward``, ...): linear in their first
    argument, the gradient they receive."""
    name = getattr(target, "__name__", "")
    return isinstance(target, torch._ops.OpOverload) and name.split(".")[0].endswith(("_backward", "_backward_data"))


def _zero_result(node: torch.fx.Node, zero: set[torch.fx.Node]) -> bool:
    args = node.args
    if _is_zero(node, zero):
        # zeros in a zero's layout: the gradient an in-place ``fill_`` of an output passes on for its old value
        return True
    if node.target is operator.getitem:
        return args[0] in zero
    if node.target in _SUMS:
        return len(args) == 2 and args[0] in zero and args[1] in zero
    if node.target is aten.copy.default:
        # the source's values in the destination's layout (a functionalized `x[..., 0] += 1` writes this way)
        return len(args) > 1 and _is_zero(args[1], zero)
    if node.target in _SCATTERS:
        return len(args) > 1 and _is_zero(args[0], zero) and _is_zero(args[1], zero)
    if node.target in _INDEXED_WRITES:
        written = [args[p] for p in _INDEXED_WRITES[node.target] if p < len(args)]
        return len(written) == 2 and all(_is_zero(a, zero) for a in written) and any(a in zero for a in written)
    if node.target in (aten.where.self, aten.where.ScalarSelf, aten.where.ScalarOther):
        # (``select_backward`` decomposes into ``where(index == i, grad, full(0))``)
        return all(_is_zero(a, zero) for a in args[1:3]) and any(a in zero for a in args[1:3])
    if node.target is aten.constant_pad_nd.default:  # (a pad's backward pads back, by negative amounts, with 0)
        return args[0] in zero and (len(args) < 3 or _is_zero(args[2], zero))
    if node.target in (aten.cat.default, aten.stack.default):
        # (the backward of ``split``/``chunk`` and of ``unbind`` joins the pieces' gradients this way)
        pieces = args[0] if args and isinstance(args[0], (list, tuple)) else ()
        return bool(pieces) and all(_is_zero(p, zero) for p in pieces) and any(p in zero for p in pieces)
    if node.target in (aten.masked_fill.Scalar, aten.masked_fill.Tensor):
        # (the backward of ``std`` and ``norm`` clears the positions where the result was 0 this way)
        return len(args) > 2 and args[0] in zero and _is_zero(args[2], zero)
    if _is_backward_op(node.target):
        return bool(args) and args[0] in zero
    positions = _LINEAR_IN.get(node.target)
    return positions is not None and any(p < len(args) and args[p] in zero for p in positions)


_ZERO_FILLS = {aten.zeros.default, aten.zeros_like.default, aten.new_zeros.default}
# Where the fill value sits in the ops that make a constant tensor (``where``'s decomposed zero is a scalar_tensor).
_FILL_POSITION: dict[Any, int] = {
    aten.full.default: 1,
    aten.full_like.default: 1,
    aten.new_full.default: 2,
    aten.scalar_tensor.default: 0,
}


def _is_zero(value: Any, zero: set[torch.fx.Node]) -> bool:
    """A structural zero, a zero number, or a tensor of zeros the graph makes (``full(size, 0)``, ``zeros``)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == 0
    if not isinstance(value, torch.fx.Node):
        return False
    if value in zero or value.target in _ZERO_FILLS:
        return True
    if value.target in _REARRANGING and value.args and _is_zero(value.args[0], zero):
        return True  # (zeros the graph makes, rearranged: ``unbind``'s backward stacks expanded zeros)
    position = _FILL_POSITION.get(value.target)
    fill = value.args[position] if position is not None and len(value.args) > position else None
    return isinstance(fill, (int, float)) and fill == 0


def _sum_without_zeros(node: torch.fx.Node, zero: set[torch.fx.Node]) -> torch.fx.Node | None:
    """The operand ``a + 0``, ``0 + b`` or ``a - 0`` reduces to, when it has the sum's shape and dtype."""
    a, b = node.args
    alpha = node.kwargs.get("alpha", 1)
    if b in zero and a not in zero:
        kept = a
    elif a in zero and b not in zero and node.target is aten.add.Tensor and alpha == 1:
        kept = b
    else:
        return None
    value, result = _static_value(kept), _static_value(node)
    if value is None or result is None or (value.shape, value.dtype) != (result.shape, result.dtype):
        return None
    return kept  # type: ignore[return-value]


def _static_value(node: Any) -> torch.Tensor | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or any(isinstance(s, torch.SymInt) for s in value.shape):
        return None
    return value


def prune_zero_tangents(
    graph_module: torch.fx.GraphModule, zero_tangents: frozenset[str], *, unreached: bool = False
) -> torch.fx.GraphModule:
    """A copy of the backward ``graph_module`` in which the placeholders named in ``zero_tangents`` are structural
    zeros: what is linear in them is zero, sums drop them, and any other use reads ``zeros_like`` of them.

    With ``unreached`` (the loss never reached those outputs), an input's gradient that is a structural zero is
    None, so autograd goes no further from it, as eager's never reaches what lies behind those outputs."""
    gm = torch.fx.GraphModule(graph_module, copy_graph(graph_module.graph))
    graph = gm.graph
    zero: set[torch.fx.Node] = {n for n in graph.nodes if n.op == "placeholder" and n.name in zero_tangents}
    # Zeros by value only: what the unreached tangents alone computed, and what is zero because one of those is.
    # A gradient among them may hold a part from a reached output that no tangent reaches (an empty tensor's,
    # ``sign``'s): eager reached that input, so its gradient is a tensor of zeros. It is None only where the ops
    # linear in the tangents say it is zero (``structural``): eager never reached it.
    by_value = _unreached_contributions(graph, zero) if unreached else set()
    structural = _structural_zeros(graph, zero) if by_value else zero
    zero |= by_value
    materialized: dict[torch.fx.Node, torch.fx.Node] = {}

    def zeros_for(node: torch.fx.Node) -> torch.fx.Node:
        # Made from the zero's static layout, the zero's own computation (which may read saved tensors the
        # call does not need) is dropped; zeros_like of it keeps that alive where the layout is symbolic.
        if node not in materialized:
            value = _static_value(node)
            with graph.inserting_after(node):
                materialized[node] = (
                    graph.call_function(
                        aten.zeros.default,
                        (list(value.shape),),
                        {"dtype": value.dtype, "device": value.device},
                    )
                    if value is not None
                    else graph.call_function(aten.zeros_like.default, (node,))
                )
            if "val" in node.meta:
                materialized[node].meta["val"] = node.meta["val"]
        return materialized[node]

    for node in list(graph.nodes):
        if node.op in ("placeholder", "output") or node in zero:
            continue
        zero_args = [a for a in node.all_input_nodes if a in zero]
        if not zero_args:
            continue
        if node.op == "call_function" and _zero_result(node, zero):
            zero.add(node)
            if any(a in by_value for a in zero_args):
                by_value.add(node)
            continue
        if node.op == "call_function" and node.target in _SUMS and len(node.args) == 2:
            kept = _sum_without_zeros(node, zero)
            if kept is not None:
                node.replace_all_uses_with(kept)
                graph.erase_node(node)
                continue
        for arg in zero_args:
            node.replace_input_with(arg, zeros_for(arg))
    output = graph.output_node()
    if unreached:
        output.args = torch.fx.node.map_arg(
            output.args, lambda arg: None if arg in zero and (arg not in by_value or arg in structural) else arg
        )
    for arg in [a for a in output.all_input_nodes if a in zero]:
        output.replace_input_with(arg, zeros_for(arg))
    graph.eliminate_dead_code()
    gm.recompile()
    return gm


def _structural_zeros(graph: torch.fx.Graph, zero: set[torch.fx.Node]) -> set[torch.fx.Node]:
    """The nodes that are zero, by the rules of the ops linear in them, when the nodes in ``zero`` are."""
    found = set(zero)
    for node in graph.nodes:
        if node.op == "call_function" and any(a in found for a in node.all_input_nodes) and _zero_result(node, found):
            found.add(node)
    return found


def _unreached_contributions(graph: torch.fx.Graph, unreached: set[torch.fx.Node]) -> set[torch.fx.Node]:
    """The gradients computed from the ``unreached`` tangents alone where they meet gradients of the others or
    leave the graph: zero, whatever the ops that made them.

    A backward is linear in its tangents, so what it computes from some of them alone adds nothing when those
    are zero, though the steps on the way need not be linear (``logcumsumexp``'s backward takes the log of its
    gradient). Eager never takes those steps; computed on zeros, they may give NaN. Only floating-point values
    count: a mask computed from those tangents is not a gradient."""
    reached = {n for n in graph.nodes if n.op == "placeholder" and n.name.startswith("tangents")} - unreached
    from_unreached, from_reached = set(unreached), set(reached)
    for node in graph.nodes:
        if node.op == "placeholder":
            continue
        inputs = node.all_input_nodes
        if any(a in from_reached for a in inputs):
            from_reached.add(node)
        elif any(a in from_unreached for a in inputs):
            from_unreached.add(node)
    contributions = set()
    for node in from_unreached - unreached:
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
            continue
        if any(user.op == "output" or user in from_reached for user in node.users):
            contributions.add(node)
    return contributions


def copy_graph(graph: torch.fx.Graph) -> torch.fx.Graph:
    """A copy of ``graph``: its nodes, with their meta, and its output."""
    copied = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    result = copied.graph_copy(graph, env)
    copied.output(result)
    return copied


def skipping_zero_tangents(
    compile_backward: Callable[[torch.fx.GraphModule, Sequence[Any]], Any],
) -> Callable[..., Any]:
    """Wrap ``compile_backward`` (a boxed backward compiler: the compiled function takes a list of arguments) so
    each call whose tangents include ones the loss never reached runs the backward compiled for those as zeros.

    Which tangents were unreached comes from :func:`reporting_reached_outputs`; without its report (a backward
    another caller runs), every all-zero tangent counts as unreached.
    """

    def compile_with_variants(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        names = [n.name for n in graph_module.graph.nodes if n.op == "placeholder"]
        tangents = [i for i, name in enumerate(names) if name.startswith("tangents")]
        if not tangents:
            return compile_backward(graph_module, example_inputs)
        # Each variant is compiled at its first call: a model returning its loss and its logits, whose
        # backward always starts from the loss, never compiles the backward for the logits.
        variants: dict[tuple[frozenset[int], bool], Any] = {}

        def run(args: list[Any]) -> Any:
            # The report sits on the autograd node running this backward: one left by a backward that failed
            # belongs to another node, so it can never be taken for this one.
            node = torch._C._current_autograd_node()
            report = vars(node).pop(_REPORT, None) if hasattr(node, "__dict__") else None
            reported = report is not None and _matches(report[0], [args[i] for i in tangents])
            if report is not None and reported:  # autograd made these zeros itself, for gradients never brought
                zeros = frozenset(tangents[j] for j in report[1] if isinstance(args[tangents[j]], torch.Tensor))
            else:
                zeros = frozenset(
                    i for i in tangents if isinstance(t := args[i], torch.Tensor) and t.is_cpu and not t.any()
                )
            key = (zeros, reported and bool(zeros))
            fn = variants.get(key)
            if fn is None:
                names_of_zeros = frozenset(names[i] for i in zeros)
                graph = prune_zero_tangents(graph_module, names_of_zeros, unreached=key[1]) if zeros else graph_module
                fn = variants[key] = compile_backward(graph, example_inputs)
            return fn(args)

        run._boxed_call = True  # type: ignore[attr-defined]
        return run

    return compile_with_variants


# The attribute where the pre-hook of a compiled graph's node leaves, for the backward the node runs next, what it
# saw: per tangent, the shape of its gradient or None, and the positions of those the loss never reached.
_REPORT = "_dynajit_unreached_tangents"
_HOOKS: weakref.WeakKeyDictionary[type, Callable[[tuple[Any, ...]], None]] = weakref.WeakKeyDictionary()


def reporting_reached_outputs(forward: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``forward`` (what AOT autograd returns for a graph) so the backward wrapped by
    :func:`skipping_zero_tangents` takes for structural zeros only the outputs the loss never reached."""

    def call(*args: Any) -> Any:
        # the mode the graph starts in: one ending in another (it left a no_grad block) still recorded
        recording = torch.is_grad_enabled()
        outputs = forward(*args)
        hooked = None
        for output in outputs if recording else ():
            node = _graph_node(output, args) if isinstance(output, torch.Tensor) else None
            if node is not None and node is not hooked:
                hook = _HOOKS.get(type(node))
                if hook is None:
                    hook = _HOOKS[type(node)] = _reporting_hook(node._forward_cls)
                node.register_prehook(hook)
                hooked = node
        return outputs

    call.__dict__.update(forward.__dict__)  # AOT autograd's zero_grad, named_parameters, named_buffers
    return call


def _graph_node(output: torch.Tensor, args: tuple[Any, ...]) -> Any:
    """AOT autograd's node for a graph output: its ``grad_fn``, or its base's for a view AOT autograd
    regenerates from an intermediate (not for a view of an input, whose history is the caller's)."""
    node, base = output.grad_fn, output._base
    if node is None or hasattr(getattr(node, "_forward_cls", None), "_aot_id"):
        return node
    if base is None or any(a is base or getattr(a, "_base", None) is base for a in args):
        return None
    node = base.grad_fn
    return node if hasattr(getattr(node, "_forward_cls", None), "_aot_id") else None


def _matches(shapes: list[Any], tangents: list[Any]) -> bool:
    """Whether the gradients a report saw (their shapes, None where unreached) are these tangents."""
    return len(shapes) == len(tangents) and all(
        s is None or (isinstance(t, torch.Tensor) and t.shape == s) for s, t in zip(shapes, tangents)
    )


def _reporting_hook(function: type) -> Callable[[tuple[Any, ...]], None]:
    """The pre-hook for the nodes of one AOT autograd function: autograd brings it a gradient per output,
    None for those the loss never reached (it makes their zeros after the pre-hooks)."""
    positions = _tangent_positions(function)

    def report(gradients: tuple[Any, ...]) -> None:
        if positions is not None and len(gradients) == positions[1]:
            seen = [None if (g := gradients[i]) is None else g.shape for i in positions[0]]
            node = torch._C._current_autograd_node()
            if hasattr(node, "__dict__"):
                setattr(node, _REPORT, (seen, [j for j, shape in enumerate(seen) if shape is None]))

    return report


def _tangent_positions(function: type) -> tuple[list[int], int] | None:
    """Which of the gradients autograd brings an AOT autograd function become its backward's tangents (the
    written inputs and the outputs that need a gradient, then the views' bases), and how many it brings;
    None for a function whose metadata reads otherwise."""
    try:
        meta = function.metadata  # type: ignore[attr-defined]
        written = [
            i
            for i, info in enumerate(meta.mutated_inp_runtime_indices)
            if meta.input_info[info].mutates_data and meta.input_info[info].requires_grad
        ]
        offset = len(meta.mutated_inp_runtime_indices)
        outputs = [
            offset + i
            for i, info in enumerate(meta.output_info)
            if info.output_type.name in ("non_alias", "unsafe_view_alias", "custom_function_view")
            and issubclass(info.raw_type, torch.Tensor)
            and info.requires_grad_for_backward
        ]
        total = offset + meta.num_outputs + meta.num_intermediate_bases
        return [*written, *outputs, *range(offset + meta.num_outputs, total)], total
    except (AttributeError, TypeError):
        return None
