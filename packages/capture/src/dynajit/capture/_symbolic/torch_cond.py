"""``torch.cond(pred, true_fn, false_fn, operands)``: a predicate known while tracing picks its branch.

In eager a Python bool picks the branch and calls it with the operands; a
predicate made of sizes is a bool here too (the ShapeEnv decided it and guards
the answer), so the chosen branch is inlined like any call and the other one
is never traced. A tensor predicate is known only when the graph runs: both
branches are traced into subgraphs of their own (subgraphs.py) and the graph
calls torch's ``cond`` higher-order op on them, which runs one, as eager does.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.subgraphs import Subgraph, trace_subgraph
from dynajit.capture._symbolic.variables import VT, ListVar, TensorVar, TupleVar, raises_in_python, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["call_cond"]

_PARAMETERS = ("pred", "true_fn", "false_fn", "operands")


def call_cond(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """Trace ``torch.cond``: the branch a constant predicate picks, called on the operands."""
    if len(args) > len(_PARAMETERS) or any(k not in _PARAMETERS for k in kwargs):
        raises_in_python("torch.cond takes pred, true_fn, false_fn and operands (a TypeError in eager)")
    bound = dict(zip(_PARAMETERS, args))
    for name, value in kwargs.items():
        if name in bound:
            raises_in_python(f"torch.cond got {name} twice (a TypeError in eager)")
        bound[name] = value
    if any(name not in bound for name in _PARAMETERS[:3]):
        raises_in_python("torch.cond is missing an argument (a TypeError in eager)")
    pred = bound["pred"]
    operands = bound.get("operands", TupleVar([]))
    if not isinstance(operands, (TupleVar, ListVar)):
        unsupported(f"torch.cond with operands {operands}")
    if isinstance(pred, TensorVar):
        return _cond_on_tensor(tx, pred, bound["true_fn"], bound["false_fn"], list(operands.items))
    if not pred.is_const() or type(pred.const()) not in (bool, int, float):
        unsupported(f"torch.cond with predicate {pred}")
    branch = bound["true_fn"] if pred.const() else bound["false_fn"]
    return branch.call(tx, list(operands.items), {})


_cond_ids = itertools.count(1)  # names the subgraphs apart within one graph module


def _cond_on_tensor(tx: Tracer, pred: TensorVar, true_fn: VT, false_fn: VT, operands: list[VT]) -> VT:
    """Both branches as subgraphs and one ``cond`` node choosing between them when the graph runs."""
    if any(not isinstance(op, TensorVar) for op in operands):
        unsupported("torch.cond with operands that are not all tensors")
    output = tx.output
    lifts: list[torch.fx.Node] = []  # the enclosing graph's nodes either branch reads, in one order for both
    n = next(_cond_ids)
    subs = [Subgraph(output, lifts, f"cond_{kind}_{n}") for kind in ("true", "false")]
    results = []
    for sub, fn in zip(subs, (true_fn, false_fn)):
        with trace_subgraph(output, sub):
            branch_args: list[VT] = [sub.operand(op.example, i) for i, op in enumerate(operands)]  # type: ignore[attr-defined]
            results.append(_branch_outputs(output, fn.call(tx, branch_args, {})))
    single = [r[1] for r in results]
    if single[0] != single[1]:
        raises_in_python("torch.cond's branches return different structures (eager raises)")
    modules = [sub.finish(nodes) for sub, (nodes, _) in zip(subs, results)]
    attrs = [output.builder.get_attr(sub.name, gm) for sub, gm in zip(subs, modules)]
    operand_nodes = tuple(output.to_proxy(op) for op in operands) + tuple(lifts)
    args = (output.to_proxy(pred), attrs[0], attrs[1], operand_nodes)
    result = output.record_node(torch.ops.higher_order.cond, args, {})
    assert isinstance(result, (TupleVar, ListVar))
    return result.items[0] if single[0] else TupleVar(list(result.items))


def _branch_outputs(output: Any, value: VT) -> tuple[list[Any], bool]:
    """The graph nodes a branch returns, and whether it returned one tensor (not a tuple or list)."""
    if isinstance(value, TensorVar):
        return [output.to_proxy(value)], True
    if isinstance(value, (TupleVar, ListVar)) and all(isinstance(v, TensorVar) for v in value.items):
        return [output.to_proxy(v) for v in value.items], False
    unsupported(f"a torch.cond branch returning {value} (only a tensor or a tuple or list of tensors is traced)")
