"""Eager's checks that fake tensors and decompositions skip, run on size-1 tensors so a compiled graph raises
what eager raises.

A meta kernel computes a result's shape and dtype, not every check the real kernel makes (``bool_tensor - 1``,
``argmax`` of bools). :func:`run_on_ones` calls an op on ones of its tensor arguments' dtypes and ranks; what
eager raises there holds for every input of the graph and comes back as :class:`EagerError`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx
from torch.utils._python_dispatch import _disable_current_modes

__all__ = ["EagerError", "checkable", "flat", "run_on_ones"]


class EagerError(Exception):
    """Eager raises ``error`` for an op of the graph (a check fake tensors skip): the compiled graph raises it too."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def checkable(op: Any) -> bool:
    """Whether :func:`run_on_ones` may check ``op``: pointwise or a reduction, and drawing no random numbers."""
    tags = getattr(op, "tags", ())
    if torch.Tag.nondeterministic_seeded in tags:
        return False  # running it would advance the generator the compiled graph draws from
    return torch.Tag.pointwise in tags or torch.Tag.reduction in tags


def run_on_ones(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any], key: str | None = None, rank: bool = True
) -> None:
    """Call ``fn`` with each tensor argument replaced by ones of its dtype and rank, of size 1 in every dim
    (2 or more for var and std, so their correction leaves degrees of freedom; of no dim without ``rank``: for a
    check of dtypes alone, where the recorded rank may be stale).

    A tensor argument is a tensor (a fake one too) or, with ``key``, an FX node whose metadata ``key``
    (``val`` in aten graphs, ``example_value`` in the caller's) holds one. Arguments of size 1 broadcast
    and reduce like the real ones, and a dim of size 0 stays 0 (eager's checks of empty reductions),
    so only checks on dtypes, emptiness, scalar arguments and options can fail here, and those hold
    for every input of the graph: what eager raises is raised again as :class:`EagerError`. An
    argument whose value is unknown, or a symbolic scalar, skips the check.
    """
    missing = object()
    leaves = [
        a.meta.get(key or "val", missing) if isinstance(a, torch.fx.Node) else a
        for a in flat([*args, *kwargs.values()])
    ]
    if any(x is missing or isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)) for x in leaves):
        return

    # var and std reduce their stand-ins with a correction, 1 unless given: of size 1, torch would warn that the
    # degrees of freedom are <= 0 (a warning eager never gave, an exception under ``-W error``)
    size = 1
    if str(getattr(fn, "__name__", "")).split(".")[0] in _CORRECTED:
        size = 2 + int(abs(kwargs.get("correction") or 0))

    def shape(a: torch.Tensor) -> list[int]:
        return [0 if isinstance(n, int) and n == 0 else size for n in a.shape] if rank else []

    def real(a: Any) -> Any:
        if key is not None and isinstance(a, torch.fx.Node):
            a = a.meta[key]
        if isinstance(a, torch.Tensor):
            return torch.ones(shape(a), dtype=a.dtype, device=a.device)
        if isinstance(a, (list, tuple)):
            return type(a)(real(x) for x in a)
        return a

    def signature(a: Any) -> Any:
        if key is not None and isinstance(a, torch.fx.Node):
            a = a.meta[key]
        if isinstance(a, torch.Tensor):
            return (torch.Tensor, a.dtype, a.device, tuple(shape(a)))
        if isinstance(a, (list, tuple)):
            return (type(a), *(signature(x) for x in a))
        return (type(a), a)

    try:
        deterministic = torch.are_deterministic_algorithms_enabled()
        call: Any = (fn, signature(tuple(args)), signature(tuple(sorted(kwargs.items()))), deterministic)
        if call in _PASSED:
            return  # the same call on the same stand-ins raised nothing
    except TypeError:  # an unhashable argument: checked each time
        call = None
    try:
        # Compilation may run under AOT autograd's fake mode: these tensors and the call must be real.
        with _disable_current_modes(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*real(tuple(args)), **{k: real(v) for k, v in kwargs.items()})
    except Exception as err:
        raise EagerError(err) from err
    if call is not None and len(_PASSED) < _PASSED_LIMIT:
        _PASSED.add(call)


_CORRECTED = frozenset({"var", "std", "var_mean", "std_mean"})

# The calls run_on_ones made that raised nothing, by op and stand-ins: the same check gives the same answer (a
# CNN's graph checks each of its dozens of ReLU6 calls on the same stand-ins).
_PASSED: set[Any] = set()
_PASSED_LIMIT = 100_000


def flat(items: Any) -> list[Any]:
    """``items`` with nested lists and tuples spread out."""
    out: list[Any] = []
    for x in items:
        if isinstance(x, (list, tuple)):
            out.extend(flat(x))
        else:
            out.append(x)
    return out
