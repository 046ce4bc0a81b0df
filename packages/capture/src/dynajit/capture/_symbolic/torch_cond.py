"""``torch.cond(pred, true_fn, false_fn, operands)``: a predicate known while tracing picks its branch.

In eager a Python bool picks the branch and calls it with the operands; a
predicate made of sizes is a bool here too (the ShapeEnv decided it and guards
the answer), so the chosen branch is inlined like any call and the other one
is never traced. A tensor predicate needs both branches as subgraphs of a
higher-order op, which capture does not build: it is a graph break, and the
call runs in Python (where torch compiles it its own way).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
    if isinstance(pred, TensorVar):
        unsupported(
            "torch.cond with a tensor predicate: capture does not trace its branches into subgraphs "
            "(the call runs in Python)"
        )
    if not pred.is_const() or type(pred.const()) not in (bool, int, float):
        unsupported(f"torch.cond with predicate {pred}")
    operands = bound.get("operands", TupleVar([]))
    if not isinstance(operands, (TupleVar, ListVar)):
        unsupported(f"torch.cond with operands {operands}")
    branch = bound["true_fn"] if pred.const() else bound["false_fn"]
    return branch.call(tx, list(operands.items), {})
