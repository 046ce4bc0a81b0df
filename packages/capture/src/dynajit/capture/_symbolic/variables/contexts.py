"""Context managers traced through ``with``: grad mode and autocast.

Grad mode (``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)``): entering one
records a ``torch._C._set_grad_enabled`` node in the graph and sets the mode for the rest of the trace
(fake tensors then carry the right ``requires_grad``); leaving it records and sets the previous mode
again. ``torch.set_grad_enabled(b)`` (``torch.autograd.set_grad_enabled``) sets the mode when it is
*called*, as its constructor does in eager, so a plain call changes the mode for the rest of the frame
(and for its caller: the transformed code leaves the real mode where the traced code left it); a ``with``
over it sets the mode again and restores the mode found at the call. ``torch._C._set_grad_enabled(b)`` is the same
plain change. The converter restores the real mode when tracing ends, however it ends.

Autocast (``torch.autocast(...)``, ``torch.amp.autocast(...)``, an existing autocast object such as
the one an ``@torch.autocast(...)`` decorator closes over): entering records
``torch.amp.autocast_mode._enter_autocast(device_type, dtype, enabled, cache_enabled)``, whose result
is the context object, and really enters the same autocast, so the fake tensors computed inside the
block get autocast's dtypes; leaving records ``_exit_autocast(ctx)`` and leaves it. An autocast still
entered when tracing stops is left by the converter (``OutputGraph.leave_entered``).
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import torch
from torch.amp.autocast_mode import _enter_autocast, _exit_autocast, _UnmanagedAutocast

from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = [
    "AUTOCAST_SETTING_ATTRS",
    "AUTOCAST_TYPES",
    "CONTEXT_MANAGER_CALLS",
    "AutocastVar",
    "ContextManagerVar",
    "GradModeVar",
    "read_default_autocast_dtype",
]


class ContextManagerVar(VT):
    """A context manager the interpreter can enter: a ``with`` statement over it is traced."""

    def enter(self, tx: Tracer) -> tuple[VT, VT]:
        """Enter the block; return the trackers of the bound ``__exit__`` and of what ``__enter__`` returned."""
        raise NotImplementedError


def _leaving_normally(args: list[VT], what: str) -> None:
    if len(args) == 3 and type(args[1]).__name__ == "ExceptionVar":
        return  # an exception raised by traced code: the block is left the same way, the exception goes on
    if any(not (a.is_const() and a.const() is None) for a in args):
        unsupported(f"leaving {what} with an exception")


# ----------------------------------------------------------------- grad mode


def _set_grad(tx: Tracer, enabled: bool) -> None:
    tx.output.call_function(torch._C._set_grad_enabled, [ConstVar(enabled)], {})
    torch._C._set_grad_enabled(enabled)


class GradModeVar(ContextManagerVar):
    """A grad-mode context manager before ``with`` enters it."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def python_type(self) -> type:
        return torch.no_grad if not self.enabled else torch.enable_grad

    def enter(self, tx: Tracer) -> tuple[VT, VT]:
        previous = torch.is_grad_enabled()
        _set_grad(tx, self.enabled)
        return _GradModeExit(previous), ConstVar(None)


class _GradModeExit(VT):
    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        _leaving_normally(args, "a grad-mode block")
        _set_grad(tx, self.previous)
        return ConstVar(None)


def _no_grad(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return GradModeVar(False)


def _enable_grad(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    return GradModeVar(True)


class _GradModeSet(GradModeVar):
    """What ``torch.set_grad_enabled(b)`` returns: the mode is already set; a ``with`` over it sets the mode
    again on entry and restores ``previous`` (the mode found at the call) on exit, as torch's class does."""

    def __init__(self, enabled: bool, previous: bool) -> None:
        super().__init__(enabled)
        self.previous = previous

    def python_type(self) -> type:
        return torch.set_grad_enabled

    def enter(self, tx: Tracer) -> tuple[VT, VT]:
        _set_grad(tx, self.enabled)
        return _GradModeExit(self.previous), ConstVar(None)


def _grad_mode_argument(args: list[VT], kwargs: dict[str, VT], what: str) -> bool:
    if len(args) + len(kwargs) != 1 or kwargs.keys() - {"mode"}:
        raises_in_python(f"{what} takes exactly one argument, mode (TypeError)")
    mode = (args[0] if args else kwargs["mode"]).const()
    if type(mode) is not bool:
        raises_in_python(f"{what} takes a bool (TypeError), not {type(mode).__name__}")
    return mode


def _set_grad_enabled(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    enabled = _grad_mode_argument(args, kwargs, "torch.set_grad_enabled()")
    previous = torch.is_grad_enabled()
    _set_grad(tx, enabled)
    return _GradModeSet(enabled, previous)


def _set_grad_enabled_c(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs:
        raises_in_python("torch._C._set_grad_enabled() takes no keyword arguments (TypeError)")
    _set_grad(tx, _grad_mode_argument(args, {}, "torch._C._set_grad_enabled()"))
    return ConstVar(None)


# ----------------------------------------------------------------- autocast

# Autocast classes whose instances behave as torch.amp.autocast itself when entered and left (the
# deprecated per-device spellings only add a TorchScript path).
AUTOCAST_TYPES: tuple[type, ...] = (
    torch.amp.autocast,
    torch.cpu.amp.autocast,
    torch.cuda.amp.autocast,
    _UnmanagedAutocast,
)

# The settings an autocast object is entered with, in _enter_autocast's argument order.
AutocastSettings = tuple[str, torch.dtype, bool, bool]
AUTOCAST_SETTING_ATTRS = ("device", "fast_dtype", "_enabled", "_cache_enabled")


def autocast_settings(mode: Any) -> AutocastSettings:
    """``(device_type, dtype, enabled, cache_enabled)`` of a constructed autocast object (defaults resolved)."""
    device, dtype, enabled, cache_enabled = (getattr(mode, name) for name in AUTOCAST_SETTING_ATTRS)
    return device, dtype, bool(enabled), bool(cache_enabled)


class AutocastVar(ContextManagerVar):
    """An autocast object: made while tracing (from constant arguments) or read from the frame."""

    def __init__(self, settings: AutocastSettings, source: Path | None = None) -> None:
        self.settings = settings
        self.source = source

    def python_type(self) -> type:
        return torch.amp.autocast

    def enter(self, tx: Tracer) -> tuple[VT, VT]:
        return _AutocastExit(enter_autocast(tx, self.settings)), self

    def getattr(self, tx: Tracer, name: str) -> VT:
        if name in AUTOCAST_SETTING_ATTRS:
            return ConstVar(self.settings[AUTOCAST_SETTING_ATTRS.index(name)])
        return super().getattr(tx, name)

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None:
            self.source.emit(cg)
            return

        def load_settings() -> int:
            for value in self.settings:
                cg.load_const_any(value)
            return len(self.settings)

        # A fresh object: entering one stores the state it restores on itself, so objects are not shared.
        cg.call_helper(torch.amp.autocast, load_settings)

    def __repr__(self) -> str:
        return f"AutocastVar{self.settings!r}"


class AutocastContextVar(VT):
    """The context object ``_enter_autocast`` returned: its graph node and the autocast entered while tracing."""

    def __init__(self, node: torch.fx.Node, mode: Any) -> None:
        self.node = node
        self.mode = mode

    def leave(self, tx: Tracer) -> None:
        """Record ``_exit_autocast(ctx)`` and leave the autocast entered while tracing."""
        output = tx.output
        if not output.entered or output.entered[-1] is not self.mode:
            unsupported("leaving an autocast context other than the innermost one entered")
        output.effect_node(_exit_autocast, (self.node,))
        output.entered.pop().__exit__(None, None, None)

    def __repr__(self) -> str:
        return f"AutocastContextVar({self.node.name})"


def enter_autocast(tx: Tracer, settings: AutocastSettings) -> AutocastContextVar:
    """Record ``_enter_autocast(*settings)`` and enter the same autocast for the rest of the trace."""
    mode = _UnmanagedAutocast(*settings)
    node = tx.output.effect_node(_enter_autocast, settings)
    mode.__enter__()
    tx.output.entered.append(mode)
    return AutocastContextVar(node, mode)


class _AutocastExit(VT):
    def __init__(self, context: AutocastContextVar) -> None:
        self.context = context

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        _leaving_normally(args, "an autocast block")
        self.context.leave(tx)
        return ConstVar(False)


def _autocast(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if not all(a.is_const() for a in [*args, *kwargs.values()]):
        unsupported("torch.autocast(...) with arguments that are not constants while tracing")
    # Made for real once here, so its argument checks and defaults are torch's own. A warning (an
    # unsupported dtype or device disables autocast) is left to Python, which shows it as eager does.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            mode = torch.amp.autocast(*[a.const() for a in args], **{k: v.const() for k, v in kwargs.items()})
        except Exception as exc:
            raises_in_python(f"torch.autocast(...) raises {type(exc).__name__}: {exc}")
    if caught:
        unsupported(f"torch.autocast(...) warns ({caught[0].message}); it is made in Python")
    dtype = kwargs["dtype"] if "dtype" in kwargs else args[1] if len(args) > 1 else None
    if dtype is None or dtype.const() is None:
        read_default_autocast_dtype(tx, mode.device)
    return AutocastVar(autocast_settings(mode))


def read_default_autocast_dtype(tx: Tracer, device: str) -> None:
    """Note that the trace took ``device``'s autocast dtype as it is now: entries are guarded on it."""
    tx.output.autocast_dtype_devices[device] = None


def _enter_autocast_call(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != len(AUTOCAST_SETTING_ATTRS) or not all(a.is_const() for a in args):
        unsupported("_enter_autocast with other than four constant arguments")
    device, dtype, enabled, cache_enabled = (a.const() for a in args)
    if dtype is None:
        read_default_autocast_dtype(tx, device)
    return enter_autocast(tx, (device, dtype, bool(enabled), bool(cache_enabled)))


def _exit_autocast_call(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if kwargs or len(args) != 1 or not isinstance(args[0], AutocastContextVar):
        unsupported("_exit_autocast of a context not entered in this trace")
    args[0].leave(tx)
    return ConstVar(None)


# ----------------------------------------------------------------- profiler ranges


class ProfilerRangeVar(ContextManagerVar):
    """``torch.profiler.record_function(name)`` before ``with`` enters it: a profiler range. A compiled graph
    records none of the ranges traced into it (the compiled call is profiled as a whole), so its block is
    traced as if the range were not there; ``__enter__`` returns the range object, as torch's does."""

    def python_type(self) -> type:
        return torch.autograd.profiler.record_function

    def enter(self, tx: Tracer) -> tuple[VT, VT]:
        return _ProfilerRangeExit(), self


class _ProfilerRangeExit(VT):
    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        _leaving_normally(args, "a profiler range")
        return ConstVar(None)


def _record_function(tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
    if not all(a.is_const() for a in [*args, *kwargs.values()]):
        unsupported("torch.profiler.record_function(...) with arguments that are not constants while tracing")
    try:  # made for real, so its argument checks are torch's own
        torch.autograd.profiler.record_function(*[a.const() for a in args], **{k: v.const() for k, v in kwargs.items()})
    except Exception as exc:
        raises_in_python(f"torch.profiler.record_function(...) raises {type(exc).__name__}: {exc}", exc)
    return ProfilerRangeVar()


# What calling each of these gives while tracing (a graph's own generated code calls the last two).
CONTEXT_MANAGER_CALLS: dict[Any, Any] = {
    torch.autograd.profiler.record_function: _record_function,
    torch.no_grad: _no_grad,
    torch.enable_grad: _enable_grad,
    torch.set_grad_enabled: _set_grad_enabled,
    torch._C._set_grad_enabled: _set_grad_enabled_c,
    torch.amp.autocast: _autocast,
    _enter_autocast: _enter_autocast_call,
    _exit_autocast: _exit_autocast_call,
}
