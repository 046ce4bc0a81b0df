"""torch's process-wide state as a trace meets it: thread counts, anomaly mode, warn-always, matmul precision, seeds.

torch reads and sets that state through ``torch._C``'s own functions (``torch.get_num_threads`` is
``torch._C.get_num_threads``), which compute nothing on tensors: a graph that called one would call it once,
while it is traced. So a read whose value GLOBAL_STATE does not already guard becomes a constant with a
PROCESS_STATE guard (the compiled code is reused only while it would read the same), and anything else, a
write above all, is a graph break: Python calls it at run time, as eager does. The Python functions of torch
that wrap them (``torch.set_warn_always``, ``torch.initial_seed``) are inlined, so the rule meets their calls.
"""

from __future__ import annotations

import re
import types
from typing import TYPE_CHECKING, Any

import torch

from dynajit.guards import GLOBAL_STATE_READERS

if TYPE_CHECKING:
    from dynajit.capture._symbolic.tracer import Tracer
    from dynajit.capture._symbolic.variables.base import VT

__all__ = ["PROCESS_STATE_WRAPPERS", "call_process_state_function", "is_process_state_call"]

# Python functions of torch that read or set process state through torch._C: inlined, not called by the graph.
PROCESS_STATE_WRAPPERS = frozenset(
    getattr(torch, name)
    for name in (
        "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
        "use_deterministic_algorithms", "get_deterministic_debug_mode", "set_deterministic_debug_mode",
        "get_float32_matmul_precision", "set_float32_matmul_precision", "is_warn_always_enabled",
        "set_warn_always", "initial_seed", "seed", "set_default_dtype", "set_default_tensor_type",
        "set_default_device",
    )
    if hasattr(torch, name)
)  # fmt: skip

# A read by its name (``get_num_threads``, ``_get_warnAlways``, ``_cuda_getDeviceCount``, ``_len_torch_function_stack``);
# whatever else torch._C's module functions do (set, clear, push, increment) is a break.
_READER = re.compile(r"_?(?:[a-z0-9]+_)?(?:get|is|are|has)(?:_|[A-Z])|_len_")

# Calls no program can see the effect of (torch's API-usage logging, as library code calls it): skipped.
_UNSEEN = frozenset(
    getattr(torch._C, name) for name in ("_log_api_usage_once", "_log_api_usage_metadata") if hasattr(torch._C, name)
)

# Reads whose values GLOBAL_STATE guards on every call already: a constant with no guard of its own.
_GUARDED = frozenset(GLOBAL_STATE_READERS.values())


def is_process_state_call(fn: Any, args: list[VT], kwargs: dict[str, VT]) -> bool:
    """Whether ``fn`` is one of torch._C's module functions (``torch.get_num_threads``, ``torch._C._is_tracing``),
    called with constants: it reads or sets process state (torch's ops are ``torch._C._VariableFunctions``'; a
    module function given a value of the trace, ``torch._C._has_torch_function(args)``, is called as before)."""
    if not isinstance(fn, types.BuiltinFunctionType) or not all(vt.is_const() for vt in (*args, *kwargs.values())):
        return False
    owner = getattr(fn, "__self__", None)
    if owner is torch._C:
        return True
    # (pybind11 functions of torch._C carry a record of theirs as __self__)
    return getattr(fn, "__module__", None) == "torch._C" and type(owner).__name__.startswith("pybind11")


def call_process_state_function(tx: Tracer, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
    """``fn(*args, **kwargs)`` met while tracing: a guarded constant when it reads state, else a graph break."""
    # (imported here: the tensor trackers read this module, and the trackers' package imports them all)
    from dynajit.capture._symbolic.guarding import SOURCELESS
    from dynajit.capture._symbolic.variables.base import unsupported
    from dynajit.capture._symbolic.variables.constant import ConstVar

    if fn in _UNSEEN:
        return ConstVar(None)
    name = f"torch.{fn.__name__}" if getattr(torch, fn.__name__, None) is fn else f"torch._C.{fn.__name__}"
    if not _READER.match(fn.__name__):
        unsupported(f"{name}() reads or sets torch's process state, which a compiled graph does not keep")
    values = tuple(vt.const() for vt in args)
    kw = {key: vt.const() for key, vt in kwargs.items()}
    value = fn(*values, **kw)
    if fn not in _GUARDED:
        if kw or not isinstance(value, int | float | bool | str | torch.dtype | type(None)):
            unsupported(f"{name}() returned a {type(value).__name__}, which a guard cannot compare")
        tx.output.guard("process_state", SOURCELESS, fn, values)
    return ConstVar(value)
