"""Channels-last layout for graphs with 2-D convolutions (option ``layout_optimization``).

oneDNN's convolution reorders an NCHW input into its own layout at every call and back; in NHWC
(channels-last) it reads and writes the tensors as they are. So an input of each convolution is
copied to channels-last once, every op after it keeps that layout (convolutions return channels-last
for a channels-last input, the kernels of pointwise ops and reductions follow their inputs' layout),
and each graph output gets back the layout eager gives it. The example values of the changed graph
are recomputed op by op on fake tensors. What the pass cannot redo exactly leaves the graph as it
was: a view eager's strides allow but channels-last does not (``view`` of a channel shuffle; a copy
there costs what channels-last saves), an in-place op, an output eager returns as a view of another,
symbolic sizes. The pass is all or nothing, and never changes what the graph computes.

A training step is rewritten as one joint graph, before it is split into forward and backward: each
convolution's gradients (``convolution_backward``) read the same channels-last copies of its input and of its
weight (float64's slow_conv2d would otherwise copy an NCHW weight into channels-last at every call, forward and
backward), the activations saved between the two are then channels-last, and the parameters' gradients get back
eager's layout. The forward convolutions' timing, with the forward's copies only, decides for their gradients too (a
float64 ResNet's slow_conv2d ran 1.7x faster both ways on NHWC); the peak-memory rule below applies to inference
graphs only.

In channels-last, a pointwise convolution (1x1, stride 1, no padding, dilation or groups) is a matrix
product of the input's ``(N*H*W, C_in)`` rows, a view, with the ``(C_in, C_out)`` weight, and its result
viewed back is the convolution's channels-last result. Each one timed at least 10% faster so runs as an
``mm``/``addmm``: on small inputs oneDNN spends most of the call reordering the weight, a copy that was also
the peak memory of small networks' last layers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch._prims_common import make_contiguous_strides_for
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._pytree import tree_leaves, tree_map

from dynajit.inductor_lite._autotune import example_tensor
from dynajit.inductor_lite._strides import storage_of

__all__ = ["channels_last"]

log = logging.getLogger("dynajit.inductor_lite")
aten = torch.ops.aten


def _val(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def _is_conv2d(node: torch.fx.Node) -> bool:
    if node.op != "call_function" or node.target is not aten.convolution.default:
        return False
    value, transposed = _val(node.args[0]), node.args[6] if len(node.args) > 6 else False
    return isinstance(value, torch.Tensor) and value.dim() == 4 and not transposed


def _static(value: Any) -> bool:
    if not isinstance(value, torch.Tensor):
        return not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))
    return not any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride(), value.storage_offset()))


def _mutates(node: torch.fx.Node) -> bool:
    target = node.target
    schema = getattr(target, "_schema", None)
    return schema is not None and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


# Below this saving per call the rounds' own jitter decides (a vision transformer's one patch convolution timed
# 0.06-0.09 ms either way, and a full benchmark run once took channels-last for it at a 20 µs floor), and the
# rewrite's copies would raise the peak memory for nothing (the input's copy doubled that model's).
_MIN_SAVING_SECONDS = 50e-6


class _ConvTiming:
    """The graph's convolutions on random inputs, prepared once per layout (the first timed round warms them
    up: oneDNN builds its primitives at the first call). Channels-last also runs the copies the rewrite adds
    (a convolution's input into channels-last, an output back into eager's layout): they are its cost. In
    channels-last, the pointwise convolutions timed faster as matrix products (``matmuls``) run as those."""

    def __init__(
        self, convs: list[torch.fx.Node], copies: list[torch.fx.Node] | None = None, weights_last: bool = False
    ) -> None:
        self.convs = convs
        self.weights_last = weights_last  # channels-last also lays out the weights so (their copies among copies)
        self.calls: dict[torch.memory_format, list[list[Any]]] = {}
        self.copies: list[tuple[torch.Tensor, torch.memory_format]] = []
        self.matmuls: frozenset[int] = frozenset()
        self.shared: dict[tuple[torch.fx.Node, int], torch.Tensor] = {}
        with unset_fake_temporarily():
            for node in copies or []:
                memory_format = node.kwargs["memory_format"]
                assert isinstance(memory_format, torch.memory_format)
                self.copies.append((example_tensor(_val(node.args[0])), memory_format))

    def prepared(self, memory_format: torch.memory_format) -> list[list[Any]]:
        if memory_format not in self.calls:
            with unset_fake_temporarily():
                calls = []
                for node in self.convs:
                    args = [
                        _random(a, memory_format)
                        if i == 0
                        else self._same_in_both(node, i, a, memory_format if self.weights_last and i == 1 else None)
                        for i, a in enumerate(tree_map(_val, node.args))
                    ]
                    calls.append(args)
            self.calls[memory_format] = calls
            if memory_format == torch.channels_last:
                self.matmuls = _faster_as_matmuls(self.convs, calls)
        return self.calls[memory_format]

    def _same_in_both(
        self, node: torch.fx.Node, position: int, value: Any, memory_format: torch.memory_format | None = None
    ) -> Any:
        """A convolution's argument other than its input (its weight): one random tensor for both layouts, a
        copy of it in ``memory_format`` where the rewrite lays it out anew."""
        if not isinstance(value, torch.Tensor):
            return value
        key = (node, position)
        if key not in self.shared:
            self.shared[key] = example_tensor(value)
        shared = self.shared[key]
        return shared if memory_format is None else shared.contiguous(memory_format=memory_format)


def _random(like: torch.Tensor, memory_format: torch.memory_format) -> torch.Tensor:
    """Random values of ``like``'s size and dtype, laid out in ``memory_format`` (0s and 1s for an integer or bool
    dtype, which ``normal_`` has no kernel for: an integer convolution's compile failed timing it)."""
    values = torch.empty(like.shape, dtype=like.dtype, device=like.device, memory_format=memory_format)
    return values.normal_() if values.is_floating_point() or values.is_complex() else values.random_(0, 2)


def _run_convolutions(
    calls: list[list[Any]],
    copies: Sequence[tuple[torch.Tensor, torch.memory_format]] = (),
    matmuls: frozenset[int] = frozenset(),
) -> None:
    with unset_fake_temporarily(), torch.no_grad():
        for source, memory_format in copies:
            source.clone(memory_format=memory_format)
        for i, args in enumerate(calls):
            if i in matmuls:
                _run_as_matmul(args)
            else:
                aten.convolution.default(*args)


def _conv_seconds(timing: _ConvTiming, memory_format: torch.memory_format) -> float:
    """One timed run of the graph's convolutions in ``memory_format`` (channels-last with the rewrite's copies,
    its pointwise convolutions in their faster form)."""
    calls = timing.prepared(memory_format)
    last = memory_format == torch.channels_last
    start = time.perf_counter()
    _run_convolutions(calls, timing.copies if last else [], timing.matmuls if last else frozenset())
    return time.perf_counter() - start


def _from_tangents(graph: torch.fx.Graph) -> set[torch.fx.Node]:
    """The nodes of a joint training graph computed from its tangents: the backward's."""
    found: set[torch.fx.Node] = set()
    for node in graph.nodes:
        if (node.op == "placeholder" and node.name.startswith("tangents")) or any(
            arg in found for arg in node.all_input_nodes
        ):
            found.add(node)
    return found


def _is_pointwise_conv(node: torch.fx.Node) -> bool:
    """Whether ``node`` is a 1x1 convolution of stride 1 without padding, dilation or groups (float32/64): on
    a channels-last input, a product of its ``(N*H*W, C_in)`` rows with the ``(C_in, C_out)`` weight."""
    args: Any = node.args
    weight, (stride, padding, dilation, _, _, groups) = _val(args[1]), args[3:9]
    return (
        _is_conv2d(node)
        and isinstance(weight, torch.Tensor)
        and weight.dtype in (torch.float32, torch.float64)
        and weight.is_contiguous()
        and tuple(weight.shape[2:]) == (1, 1)
        and (list(stride), list(padding), list(dilation), groups) == ([1, 1], [0, 0], [1, 1], 1)
    )


def _matmul_form(call: Callable[..., Any], x: Any, weight: Any, bias: Any, shape: Sequence[int], out: int) -> Any:
    """A pointwise convolution of channels-last ``x`` (of ``shape``, into ``out`` channels) as a matrix product,
    channels-last; ``call(op, *args)`` runs each op, or adds it to a graph."""
    n, c, h, w = shape
    rows = call(aten.view.default, call(aten.permute.default, x, [0, 2, 3, 1]), [n * h * w, c])
    weight_t = call(aten.permute.default, call(aten.view.default, weight, [out, c]), [1, 0])
    product = call(aten.mm.default, rows, weight_t) if bias is None else call(aten.addmm.default, bias, rows, weight_t)
    return call(aten.permute.default, call(aten.view.default, product, [n, h, w, out]), [0, 3, 1, 2])


def _run_op(op: Any, *args: Any) -> Any:
    return op(*args)


def _run_as_matmul(args: list[Any]) -> Any:
    """Run the pointwise convolution of ``args`` (``aten.convolution``'s, on real tensors) as a matrix product."""
    return _matmul_form(_run_op, args[0], args[1], args[2], args[0].shape, args[1].shape[0])


def _faster_as_matmuls(convs: list[torch.fx.Node], calls: list[list[Any]]) -> frozenset[int]:
    """The pointwise convolutions among ``convs`` that run at least 10% faster as matrix products on their
    channels-last ``calls`` (interleaved rounds, the fastest of each): oneDNN reorders the weight at every call
    of a small convolution, and that copy is the peak memory of a small network's last layers."""
    faster = set()
    with unset_fake_temporarily(), torch.no_grad():
        for i, (node, args) in enumerate(zip(convs, calls)):
            if not _is_pointwise_conv(node):
                continue
            rounds = [(_seconds(aten.convolution.default, args), _seconds(_run_as_matmul, [args])) for _ in range(4)]
            if min(r[1] for r in rounds[1:]) <= 0.9 * min(r[0] for r in rounds[1:]):  # (the first warms up)
                faster.add(i)
    return frozenset(faster)


def _seconds(fn: Any, args: list[Any]) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def channels_last(
    gm: torch.fx.GraphModule, device: torch.device, *, training: bool = False
) -> torch.fx.GraphModule | None:
    """A copy of ``gm`` whose convolutions run channels-last, or None when the pass does not apply or would
    not pay: the graph's convolutions are timed in both layouts (on this machine, at these sizes), and
    channels-last is kept only when they run at least 10% (and 50 µs) faster in it, in every round, the copies it adds
    included (a training step's: 5%, in its fastest round)."""
    nodes = list(gm.graph.nodes)
    convs = [n for n in nodes if _is_conv2d(n)]
    if device.type != "cpu" or not convs:
        return None
    if any(n.op == "call_function" and _mutates(n) for n in nodes) or not all(_static(_val(n)) for n in nodes):
        return None
    outputs = next(n for n in reversed(nodes) if n.op == "output").args[0]
    if _outputs_alias(outputs):
        return None
    # The rewrite first: it costs no run, and the convolutions are timed only for a graph it applies to.
    graph = torch.fx.Graph()
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    graph.graph_copy(gm.graph, env)  # type: ignore[arg-type]
    try:
        _to_channels_last(graph, weights=training)
        _refake(graph)
    except _Abort as why:
        log.info("inductor-lite: convolutions stay in their layout (%s)", why)
        return None
    new_outputs = tuple(_eager_layout(graph, env[o], _val(o)) if isinstance(o, torch.fx.Node) else o for o in outputs)
    if any(new is None for new, old in zip(new_outputs, outputs) if old is not None):  # (a gradient not needed)
        return None
    # Interleaved rounds, the fastest of each: a burst of load from elsewhere slows one round, not a layout.
    kept = set(env.values())
    copies = [n for n in graph.nodes if n.target is aten.clone.default and n not in kept]
    # (a training step's gradients are not timed: they gain at least as the forward convolutions do, and timing
    # them too tripled the cost of the decision, the larger part of a ResNet's cold compile. Nor are the copies
    # the backward makes, the parameters' gradients back into eager's layout: set against the forward's gains
    # alone, they took back the 25% a float64 ResNet's forward convolutions gained, where its step ran 11%
    # faster channels-last.)
    if training:
        backward = _from_tangents(graph)
        copies = [n for n in copies if n not in backward]
    timing = _ConvTiming(convs, copies, weights_last=training)
    rounds = [
        (_conv_seconds(timing, torch.contiguous_format), _conv_seconds(timing, torch.channels_last))
        for _ in range(4 if training else 3)
    ][1:]  # (the first warms up: oneDNN builds its primitives at a convolution's first call)
    nchw, nhwc = min(r[0] for r in rounds), min(r[1] for r in rounds)
    # A training step's convolutions decide on their fastest rounds at a smaller margin: its untimed gradients
    # gain as well (a float64 ResNet's forward convolutions timed 12% faster channels-last, its step ran 14%
    # faster), and a round slowed by load elsewhere must not undo that (it did, at 10% in every round).
    margin, every_round = (0.95, False) if training else (0.9, True)
    if nhwc > margin * nchw or nchw - nhwc < _MIN_SAVING_SECONDS or (every_round and any(r[1] >= r[0] for r in rounds)):
        log.info(
            "inductor-lite: convolutions stay in their layout (channels-last %.2f ms, as is %.2f ms)",
            nhwc * 1e3,
            nchw * 1e3,
        )
        return None
    as_matmuls = {env[convs[i]] for i in timing.matmuls}
    if not training and _peak_bytes(
        graph, new_outputs, lambda n: 0 if n in as_matmuls else _held_by_onednn(n)
    ) > _peak_bytes(gm.graph, outputs, lambda n: _held_by_onednn(n, channels_last=False)):
        log.info("inductor-lite: convolutions stay in their layout (channels-last would raise the peak memory)")
        return None
    log.info("inductor-lite: convolutions run channels-last (%.2f ms, as is %.2f ms)", nhwc * 1e3, nchw * 1e3)
    graph.output(new_outputs)  # (before the rewrite, which then replaces a convolution returned as it is)
    _rewrite_as_matmuls(graph, [env[c] for c in convs], timing)
    return torch.fx.GraphModule(gm, graph)


def _rewrite_as_matmuls(graph: torch.fx.Graph, convs: list[torch.fx.Node], timing: _ConvTiming) -> None:
    """Replace the convolutions ``timing`` found faster as matrix products by those."""
    mode = _fake_mode(graph)
    made: list[torch.fx.Node] = []

    def add(op: Any, *args: Any) -> torch.fx.Node:
        node = graph.call_function(op, args)
        with mode:
            node.meta["val"] = op(*tree_map(_val, args))
        made.append(node)
        return node

    replaced = 0
    for i in sorted(timing.matmuls):
        node = convs[i]
        if not _val(node.args[0]).is_contiguous(memory_format=torch.channels_last):
            continue  # (its rows would not be a view)
        shape, out = _val(node.args[0]).shape, _val(node.args[1]).shape[0]
        made.clear()
        try:
            with graph.inserting_before(node):
                x, weight, bias = node.args[:3]
                replacement = _matmul_form(add, x, weight, bias, shape, out)
            old, new = _val(node), _val(replacement)
            same = (old.shape, old.stride(), old.dtype) == (new.shape, new.stride(), new.dtype)
        except Exception:  # (an op the fake tensors refuse: it stays a convolution)
            same = False
        if not same:
            # (what reads it was faked on the convolution's layout: it stays a convolution)
            for unused in reversed(made):
                graph.erase_node(unused)
            continue
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        replaced += 1
    if replaced:
        log.info("inductor-lite: %d pointwise convolutions run as matrix products", replaced)


class _Abort(Exception):
    pass


def _held_by_onednn(node: torch.fx.Node, channels_last: bool = True) -> int:
    """The bytes oneDNN allocates for itself while it runs a 2-D convolution (torch 2.14, as profiled): a copy
    of the weight in its own layout at every call, and a second one for a channels-last input, or a second
    output for an NCHW one (written in its layout, then reordered). Nothing for another op."""
    if not _is_conv2d(node):
        return 0
    weight = _val(node.args[1]).untyped_storage().nbytes()
    return 2 * weight if channels_last else weight + _val(node).untyped_storage().nbytes()


def _peak_bytes(graph: torch.fx.Graph, outputs: Sequence[Any], held_while_running: Callable[[Any], int]) -> int:
    """The most bytes the graph's own tensors hold at once, its ops run one by one in order.

    A storage an op makes lives from that op to the last op reading any view of it (an output's to the end);
    the inputs and constants are the caller's either way and not counted. ``held_while_running(node)`` is
    what an op allocates for itself (:func:`_held_by_onednn`). Channels-last raises the peak of a graph whose
    largest moment is a convolution with a large weight and a small output (a vision transformer's one patch
    convolution: its input's copy and the second weight copy doubled that model's peak), not of a network
    whose activations dwarf its weights.
    """
    nodes = [n for n in graph.nodes if n.op != "output"]
    end = len(nodes)
    positions = {node: i for i, node in enumerate(nodes)}
    returned = {o for o in outputs if isinstance(o, torch.fx.Node)}
    born: dict[Any, tuple[int, int]] = {}
    last_read: dict[Any, int] = {}
    callers: set[Any] = set()
    for position, node in enumerate(nodes):
        reads = [positions.get(user, end) for user in node.users if user.op != "output"]
        users_end = end if node in returned else max(reads, default=position)
        for value in [v for v in tree_leaves(_val(node)) if isinstance(v, torch.Tensor)]:
            storage = storage_of(value)
            if node.op != "call_function" or storage in callers:
                callers.add(storage)  # (the caller's storage, or a view of it)
                continue
            born.setdefault(storage, (position, value.untyped_storage().nbytes()))
            last_read[storage] = max(last_read.get(storage, position), users_end)
    held = peak = 0
    frees: dict[int, int] = {}
    by_birth: dict[int, int] = {}
    for storage, (position, nbytes) in born.items():
        by_birth[position] = by_birth.get(position, 0) + nbytes
        frees[last_read[storage]] = frees.get(last_read[storage], 0) + nbytes
    for position in range(end + 1):
        held += by_birth.get(position, 0)
        peak = max(peak, held + (held_while_running(nodes[position]) if position < end else 0))
        held -= frees.get(position, 0)
    return peak


def _outputs_alias(outputs: Any) -> bool:
    storages = [storage_of(_val(o)) for o in outputs if isinstance(_val(o), torch.Tensor) and _val(o).numel()]
    return len(storages) != len(set(storages))


def _to_channels_last(graph: torch.fx.Graph, weights: bool = False) -> None:
    """Give each 2-D convolution a channels-last copy of its input (one copy per input node), and with
    ``weights`` of its weight too; one found channels-last already once the graph is refaked leaves
    (:func:`_refake`)."""
    copies: dict[torch.fx.Node, torch.fx.Node] = {}

    def channels_last_copy(source: Any) -> torch.fx.Node | None:
        if not isinstance(source, torch.fx.Node) or _val(source).is_contiguous(memory_format=torch.channels_last):
            return None
        if source not in copies:
            with graph.inserting_after(source):
                copies[source] = graph.call_function(
                    aten.clone.default, (source,), {"memory_format": torch.channels_last}
                )
        return copies[source]

    positions = (0, 1) if weights else (0,)
    for node in list(graph.nodes):
        if not _is_conv2d(node):
            continue
        for position in positions:
            copy = channels_last_copy(node.args[position])
            if copy is not None:
                node.update_arg(position, copy)
    for node in list(graph.nodes):  # a training graph's gradients of each convolution read the same copies
        if node.target is aten.convolution_backward.default:
            for position in (1, 2):  # its input, its weight
                if node.args[position] in copies:
                    node.update_arg(position, copies[node.args[position]])


def _fake_mode(graph: torch.fx.Graph) -> Any:
    for node in graph.nodes:
        value = _val(node)
        if isinstance(value, torch.Tensor) and hasattr(value, "fake_mode"):
            return value.fake_mode
    raise _Abort("no fake tensor to run the graph's ops on")


def _refake(graph: torch.fx.Graph) -> None:
    """Recompute every call's example value in order, on the new layouts; a channels-last copy of a value that
    is channels-last on them already (a convolution's output after another's) is dropped."""
    mode = _fake_mode(graph)
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is aten.clone.default and node.kwargs.get("memory_format") is torch.channels_last:
            source = _val(node.args[0])
            if isinstance(source, torch.Tensor) and source.is_contiguous(memory_format=torch.channels_last):
                node.replace_all_uses_with(node.args[0])  # type: ignore[arg-type]
                graph.erase_node(node)
                continue
        args, kwargs = tree_map(_val, (node.args, node.kwargs))
        try:
            with mode:
                node.meta["val"] = node.target(*args, **kwargs)  # type: ignore[operator]
        except Exception as err:
            raise _Abort(f"{node.target} on the new layouts: {type(err).__name__}") from None


def _eager_layout(graph: torch.fx.Graph, node: torch.fx.Node, eager: Any) -> torch.fx.Node | None:
    """``node`` as a graph output in eager's layout: itself, a contiguous copy, or None (cannot be matched)."""
    value = _val(node)
    if not isinstance(eager, torch.Tensor) or not isinstance(value, torch.Tensor):
        return node
    # A size-1 dim's stride counts too: it addresses nothing, but the next convolution reading the output lays its
    # own result out by it (a one-channel output in channels-last strides makes the next one's channels-last).
    if tuple(value.stride()) == tuple(eager.stride()) or eager.numel() == 0:
        return node
    if tuple(eager.stride()) != make_contiguous_strides_for(eager.shape) or _views_an_input(graph, value):
        return None
    with graph.inserting_after(node):
        copy = graph.call_function(aten.clone.default, (node,), {"memory_format": torch.contiguous_format})
    copy.meta["val"] = eager
    return copy


def _views_an_input(graph: torch.fx.Graph, value: torch.Tensor) -> bool:
    """Whether ``value`` views a graph input's memory (such an output must stay that view, not a copy)."""
    return any(
        node.op == "placeholder"
        and isinstance(_val(node), torch.Tensor)
        and storage_of(_val(node)) == storage_of(value)
        for node in graph.nodes
    )
