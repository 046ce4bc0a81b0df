"""Operations whose errors depend on tensor data, traced inside a ``try``: they are left to Python.

A shape error is known while tracing (the fake tensor raises it), so the trace
raises it where Python does and a ``try`` of the traced code catches it. An
index out of range (``gather``, ``embedding``, ``x[idx]``), an integer
division by zero or a failed ``torch._assert_async`` shows only when the
graph runs: after the traced ``try`` statement has been left, so the handler
never sees it and the compiled call raises where eager returned. Such an
operation inside a block whose ``except`` clause may catch it (in the frame
or a caller inlined into it) is a graph break, and Python runs it under its
handler. A ``finally`` body, a ``with`` block's cleanup and the compiler's
own regions (an inlined comprehension's, a generator's StopIteration guard)
re-raise: the block around them decides. (transformers wraps every model's
forward in ``try``/``finally``: those stay one graph.)
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.blocks import region_of
from dynajit.capture._symbolic.variables import unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["check_data_error_handled"]

# Raise for some values of their tensor arguments' data (indices out of range, invalid probabilities, singular
# matrices, class targets), named as torch functions and Tensor methods are.
_RAISE_ON_DATA = frozenset(
    """gather scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ index_select index_add
    index_add_ index_copy index_copy_ index_fill index_fill_ index_put index_put_ take take_along_dim embedding
    embedding_bag one_hot bincount multinomial bernoulli bernoulli_ normal normal_ poisson repeat_interleave
    masked_scatter masked_scatter_ cholesky inverse linalg_inv linalg_cholesky linalg_solve cross_entropy_loss
    nll_loss nll_loss_nd nll_loss2d _assert_async""".split()
)
# Raise for a zero divisor (or a negative power) when every operand is an integer.
_INTEGER_DIVISIONS = frozenset(
    {operator.floordiv, operator.mod, operator.ifloordiv, operator.imod, operator.pow, operator.ipow}
    | set("floor_divide floor_divide_ remainder remainder_ fmod fmod_ div div_ divide divide_ pow pow_".split())
)
_INDEXING = (operator.getitem, operator.setitem)


def _name(fn: Any) -> Any:
    return fn if isinstance(fn, str) else getattr(fn, "__name__", None)


def _is_integer(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        return not value.dtype.is_floating_point and not value.dtype.is_complex and value.dtype != torch.bool
    return isinstance(value, int) and not isinstance(value, bool)


def _example(value: Any) -> Any:
    return value.meta.get("example_value") if isinstance(value, torch.fx.Node) else value


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [_example(value)]


def raises_on_data(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn`` on these arguments (graph nodes and constants) may raise for some tensor data."""
    if fn in _INDEXING:
        index = _leaves(args[1]) if len(args) > 1 else []
        return any(isinstance(i, torch.Tensor) and _is_integer(i) for i in index)
    name = _name(fn)
    if name in _RAISE_ON_DATA:
        return True
    if fn in _INTEGER_DIVISIONS or name in _INTEGER_DIVISIONS:
        if name in ("div", "div_", "divide", "divide_") and _example(kwargs.get("rounding_mode")) is None:
            return False
        operands = [_example(a) for a in args[:2]]
        return any(isinstance(v, torch.Tensor) for v in operands) and all(_is_integer(v) for v in operands)
    return False


def _catches(insts: list[Any], handler: int) -> bool:
    """Whether the handler starting at index ``handler`` is an ``except`` clause: a bare one pops the exception at
    once, a typed one loads its classes and matches them. A ``finally`` body and a ``with`` block's cleanup let
    the exception go on (their effects when a graph raises are not this check's business)."""
    if insts[handler].opname != "PUSH_EXC_INFO":
        return False
    for inst in insts[handler + 1 : handler + 16]:
        if inst.opname in ("CHECK_EXC_MATCH", "CHECK_EG_MATCH"):
            return True
        if inst.opname == "POP_TOP" and inst.index == handler + 1:
            return True  # a bare ``except:``
        if not inst.opname.startswith(("LOAD_", "BUILD_TUPLE", "PUSH_NULL", "COPY")):
            return False
    return False


def _caught_in(tx: Tracer) -> bool:
    """Whether an exception raised at ``tx``'s current instruction reaches an ``except`` clause of its code
    (through the ``finally`` bodies, ``with`` cleanups and inlined comprehensions around it, which re-raise)."""
    inst, seen = tx.current, set()
    while inst is not None and inst.index not in seen:
        seen.add(inst.index)
        region = region_of(tx.code, tx.insts, inst)
        if region is None:
            return False
        if _catches(tx.insts, region.handler):
            return True
        inst = tx.insts[region.handler]  # the handler re-raises: the region around it decides
    return False


def check_data_error_handled(tx: Tracer | None, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """A graph break when ``fn`` may raise on tensor data at a point a ``try`` of the traced code catches."""
    if not raises_on_data(fn, args, kwargs):
        return
    frame = tx
    while frame is not None:
        if _caught_in(frame):
            unsupported(
                f"{_name(fn)} may raise for its tensors' data inside a try block: the graph would raise it "
                "after the block is left, where its handler cannot catch it"
            )
        frame = frame.parent
