"""Inference graphs traced to aten in one pass, where AOT autograd's first pass would find nothing to act on.

AOT autograd traces a graph twice: a first pass learns which inputs it writes and which outputs alias an input
or each other, a second records the aten graph, and a runtime wrapper then writes inputs back and regenerates
aliased outputs. An inference graph of plain tensors that writes nothing it is given and returns only fresh
tensors needs none of that. Such a graph is traced here once, through the same functionalization,
decompositions, node metadata and dead-code elimination as AOT autograd's second pass, and its compiled form is
called straight, parameters and buffers first. The trace itself shows whether the graph qualifies: a write to an
input, parameter or buffer is a mutable op in it, and an aliased output shares its storage. A graph that does
not qualify, or that the trace cannot take, is compiled through AOT autograd as before.

Functionalization costs as much as the rest of the trace and changes nothing in a graph that writes no tensor,
the common case in inference. A graph whose torch-level nodes show no write is traced as written; should its aten
graph write a tensor after all (a decomposition's in-place op), it is traced again functionalized.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
import torch.fx.traceback as fx_traceback
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils import stateless
from torch.utils import _pytree as pytree

from dynajit.fxgraph import writes_in_place
from dynajit.inductor_lite._direct import PLAIN_TENSORS, fresh_outputs, grad_off_caller

__all__ = ["OneTrace", "trace_inference_once"]


class OneTrace:
    """An inference graph traced once: the aten graph, its fake inputs, and the state tensors it takes first."""

    def __init__(self, graph: torch.fx.GraphModule, fake_inputs: list[torch.Tensor], state: list[torch.Tensor]):
        self.graph, self.fake_inputs, self.state = graph, fake_inputs, state

    def caller(self, compiled: Callable[[list[Any]], Any]) -> Callable[..., Any]:
        """Call ``compiled`` (boxed, on the state tensors then the arguments) as AOT autograd's inference graph
        would be called: grad mode off for its duration."""
        return grad_off_caller(compiled, self.state)


def trace_inference_once(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], decompositions: dict[Any, Callable[..., Any]]
) -> OneTrace | None:
    """``gm``'s aten inference graph, traced once with fake copies of ``example_inputs`` (real, static tensors),
    or None where the graph needs AOT autograd: grad mode is on at the call or turned on inside, autocast is on,
    a result requires grad, it takes or holds a tensor subclass or a higher-order op, writes a tensor it is
    given, or returns a view, an input or a tensor twice."""
    if torch.is_grad_enabled() or torch._C._is_any_autocast_enabled():
        return None
    if not all(type(a) in PLAIN_TENSORS for a in example_inputs):
        return None
    named = {**dict(gm.named_parameters(remove_duplicate=False)), **dict(gm.named_buffers(remove_duplicate=False))}
    state = list({id(t): t for t in named.values()}.values())
    if not all(type(t) in PLAIN_TENSORS for t in state):
        return None
    if any(n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator) for n in gm.graph.nodes):
        return None
    functional = _may_write(gm)
    traced = _trace(gm, example_inputs, decompositions, named, state, functional)
    if traced is _RETRY_FUNCTIONAL:
        traced = _trace(gm, example_inputs, decompositions, named, state, functional=True)
    if not isinstance(traced, OneTrace) or not _fresh_outputs_only(traced.graph):
        return None
    return traced


_RETRY_FUNCTIONAL = object()  # a trace as written that wrote a tensor the graph made


def _trace(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    decompositions: dict[Any, Callable[..., Any]],
    named: dict[str, torch.Tensor],
    state: list[torch.Tensor],
    functional: bool,
) -> OneTrace | object | None:
    """``gm`` traced to aten on fresh fake tensors; functionalized, or as written, which costs half as much and
    records the same graph wherever nothing is written (then there is nothing to functionalize). A trace as
    written that writes a graph input or changes a tensor's layout in place is None (AOT autograd's case either
    way); one that writes only the values of tensors the graph made, or fails, is ``_RETRY_FUNCTIONAL``."""
    position = {id(t): i for i, t in enumerate(state)}
    fake_mode = FakeTensorMode()  # (fresh: a trace as written may have changed its fakes' metadata)
    fakes = [fake_mode.from_tensor(t) for t in (*state, *example_inputs)]
    watch = _StateWatch(gm, functional)

    def run(*flat: torch.Tensor) -> Any:
        replaced = {name: flat[position[id(t)]] for name, t in named.items()}
        with stateless._reparametrize_module(gm, replaced), fx_traceback.preserve_node_meta():
            return watch.run(*flat[len(state) :])

    # (fake tensors never draw from the random generator; a trace that fails is left to AOT autograd to report,
    # with grad mode as it was, whatever the graph set before failing)
    try:
        with torch.no_grad(), fake_mode, enable_python_dispatcher():
            traced = run if not functional else torch.func.functionalize(run, remove="mutations")
            graph = make_fx(traced, decompositions, record_module_stack=True)(*fakes)
    except Exception:  # (AOT autograd traces the same graph next and raises what is wrong with it)
        return None if functional else _RETRY_FUNCTIONAL
    if watch.mode_switched or watch.grad_result:
        return None
    if not functional:
        written, restrided = _written_storages(graph)
        if restrided:  # (functionalization keeps an in-place view op: AOT autograd's case either way)
            return None
        if written:
            inputs = {n.meta["val"].untyped_storage()._cdata for n in graph.graph.nodes if n.op == "placeholder"}
            return None if written & inputs else _RETRY_FUNCTIONAL
    graph.graph.eliminate_dead_code()
    graph.recompile()
    return OneTrace(graph, fakes, state)


class _StateWatch(torch.fx.Interpreter):
    """Runs the caller's graph and notes whether it ever needs AOT autograd's view of autograd: grad mode or
    autocast turned on by one of its nodes, or a node's result requiring grad (``requires_grad_()``).

    Traced as written, a view of a tensor requiring grad requires grad too, under no_grad as in eager, where a
    functionalized trace's does not: such a view is not counted."""

    def __init__(self, gm: torch.fx.GraphModule, functional: bool) -> None:
        super().__init__(gm)
        self.functional = functional
        self.mode_switched = self.grad_result = False

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if torch.is_grad_enabled() or torch._C._is_any_autocast_enabled():
            self.mode_switched = True
        elif n.op not in ("placeholder", "get_attr") and any(
            isinstance(t, torch.Tensor) and self._requires_grad(t) for t in pytree.tree_leaves(result)
        ):
            self.grad_result = True
        return result

    def _requires_grad(self, t: torch.Tensor) -> bool:
        if self.functional or not t._is_view():
            return t.requires_grad
        return t.requires_grad and not t._base.requires_grad


def _may_write(gm: torch.fx.GraphModule) -> bool:
    """Whether a node of ``gm`` may write a tensor as the program wrote it: a module call, or a write fxgraph
    knows (an in-place op, ``out=``, ``inplace=True``, an augmented or item assignment). A write this misses is
    found in the trace (``_written_storages``) and traced again functionalized: only the cost is at stake."""
    return any(node.op == "call_module" or writes_in_place(node) for node in gm.graph.nodes)


def _written_storages(graph: torch.fx.GraphModule) -> tuple[set[int], bool]:
    """The storages (of fake tensors) that ops of aten ``graph`` write, and whether an in-place view op
    (``as_strided_``, ``t_``) is among them."""
    written, restrided = set(), False
    for node in graph.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if not node.target._schema.is_mutable:
            continue
        restrided = restrided or torch.Tag.inplace_view in node.target.tags
        arguments = node.target._schema.arguments
        values = [*node.args, *(node.kwargs.get(a.name) for a in arguments[len(node.args) :])]
        for argument, value in zip(arguments, values):
            if argument.alias_info is not None and argument.alias_info.is_write:
                for leaf in pytree.tree_leaves(value):
                    if isinstance(leaf, torch.fx.Node) and isinstance(leaf.meta.get("val"), torch.Tensor):
                        written.add(leaf.meta["val"].untyped_storage()._cdata)
                    else:  # (a write the trace cannot place: not an input's storage, so the functionalized trace decides)
                        written.add(-1)
    return written, restrided


def _fresh_outputs_only(graph: torch.fx.GraphModule) -> bool:
    """Whether ``graph`` writes none of its inputs and returns only tensors that alias nothing else it sees."""
    placeholders = []
    for node in graph.graph.nodes:
        if node.op == "placeholder":
            placeholders.append(node.meta.get("val"))
        elif node.op == "call_function":
            if node.target is operator.getitem:
                continue
            if not isinstance(node.target, torch._ops.OpOverload) or node.target._schema.is_mutable:
                return False
    outputs = [n.meta.get("val") if isinstance(n, torch.fx.Node) else n for n in graph.graph.output_node().args[0]]
    return fresh_outputs(placeholders, outputs)
