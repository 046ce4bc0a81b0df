"""Guards on process-wide state: torch's global modes (GLOBAL_STATE), one state a trace read (PROCESS_STATE) and the
running backend (BACKEND_MATCH)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import torch

from ._guard import Check, Cost, Guard, short_repr

__all__ = [
    "GLOBAL_STATE_READERS",
    "backend_match",
    "global_module_hooks",
    "global_module_hooks_dicts",
    "global_state",
    "process_state",
]

# What GLOBAL_STATE snapshots: name -> function reading it. The C functions are called directly
# (the public wrappers add a Python frame on every guard evaluation).
GLOBAL_STATE_READERS: dict[str, Callable[[], Any]] = {
    "grad mode": torch._C.is_grad_enabled,
    # A graph traced under inference_mode answers is_inference() (its new tensors are inference tensors) and
    # torch.is_inference_mode_enabled() for that mode; under plain no_grad both differ.
    "inference mode": torch.is_inference_mode_enabled,
    "default dtype": torch.get_default_dtype,
    "deterministic algorithms": torch._C._get_deterministic_algorithms,
    "deterministic algorithms warn_only": torch._C._get_deterministic_algorithms_warn_only,
    "functorch transforms active": torch._C._are_functorch_transforms_active,
    "torch function modes": torch._C._len_torch_function_stack,
    # A dispatch mode sees every aten op eager runs: a compiled graph's kernels would run none of them.
    "torch dispatch modes": torch._C._len_torch_dispatch_stack,
    # -1 outside any forward_ad.dual_level(); a C-level partial, so reading it adds no Python frame either
    "forward AD level": functools.partial(getattr, torch.autograd.forward_ad, "_current_level"),
}

# State that matters only while another is on: with the other off now, its own check suffices
# (switching the other on fails that check), so the dependent one is not read on every call.
_ONLY_WHILE_ON = {"deterministic algorithms warn_only": "deterministic algorithms"}

_AUTOCAST_DEVICES = ("cpu", "cuda")


def _show(value: Any) -> str:
    return str(value).removeprefix("torch.") if isinstance(value, torch.dtype) else repr(value)


def _state_check(what: str, template: str, constants: dict[str, Any], read: Callable[[], Any], expected: Any) -> Check:
    def explain(values: tuple[Any, ...]) -> str:
        return f"global state {what}: expected {_show(expected)}, got {_show(read())}"

    return Check(template, (), Cost.CHEAP, explain, constants)


def _reader_check(what: str, read: Callable[..., Any], args: tuple[Any, ...] = ()) -> tuple[Check, Any]:
    """A check that ``read(*args)`` still returns what it returns now (the arguments passed as constants)."""
    value = read(*args)
    op = "is" if value is None or isinstance(value, bool | torch.dtype) else "=="  # (those are singletons)
    names = [f"arg{i}" for i in range(len(args))]
    template = f"{{read}}({', '.join(f'{{{name}}}' for name in names)}) {op} {{expected}}"
    constants = {"read": read, "expected": value, **dict(zip(names, args, strict=True))}
    return _state_check(what, template, constants, functools.partial(read, *args), value), value


# Per-device autocast state, read only when some autocast is on: (what, reader taking the device type).
_AUTOCAST_READERS: dict[str, Callable[[str], Any]] = {
    "enabled": torch._C.is_autocast_enabled,
    "dtype": torch._C.get_autocast_dtype,
}


def _device_check(device: str, what: str, read: Callable[[str], Any]) -> tuple[Check, Any]:
    value = read(device)
    check = _state_check(
        f"autocast({device}) {what}",
        f"{{read}}({device!r}) is {{expected}}",
        {"read": read, "expected": value},
        functools.partial(read, device),
        value,
    )
    return check, value


def _autocast_checks() -> tuple[list[Check], tuple[Any, ...]]:
    any_enabled = torch._C._is_any_autocast_enabled
    if not any_enabled():
        return [_state_check("autocast", "not {any_enabled}()", {"any_enabled": any_enabled}, any_enabled, False)], ()
    checks: list[Check] = []
    snapshot: list[Any] = []
    for device in _AUTOCAST_DEVICES:
        for what, read in _AUTOCAST_READERS.items():
            check, value = _device_check(device, what, read)
            checks.append(check)
            snapshot.append(value)
            if value is False:  # the dtype of a disabled autocast does not matter
                break
    return checks, tuple(snapshot)


def _default_dtype_checks(devices: Iterable[str], checks: list[Check]) -> tuple[list[Check], tuple[Any, ...]]:
    """Autocast dtype checks for ``devices``, leaving out those ``checks`` already holds."""
    added: list[Check] = []
    snapshot: list[tuple[str, torch.dtype]] = []
    for device in dict.fromkeys(devices):
        check, dtype = _device_check(device, "dtype", _AUTOCAST_READERS["dtype"])
        if not any(c.template == check.template for c in checks):
            added.append(check)
            snapshot.append((device, dtype))
    return added, tuple(snapshot)


def global_state(autocast_dtype_devices: Iterable[str] = ()) -> Guard:
    """GLOBAL_STATE: grad mode, inference mode, default dtype, deterministic algorithms, autocast (CPU and CUDA), functorch
    transforms, torch-function and torch-dispatch modes and the forward-mode AD level are as they are now.

    Autocast's per-device state is read only while some autocast is on. ``autocast_dtype_devices`` names
    devices whose autocast dtype (``torch.get_autocast_dtype(device)``: the dtype a ``torch.autocast(device)``
    without one takes) is checked in any case, for frames that resolved that default while tracing.
    """
    checks: list[Check] = []
    state: dict[str, Any] = {}
    for what, read in GLOBAL_STATE_READERS.items():
        parent = _ONLY_WHILE_ON.get(what)
        if parent is not None and state[parent] is False:
            continue
        check, state[what] = _reader_check(what, read)
        checks.append(check)
    snapshot = tuple(state.items())
    autocast, autocast_snapshot = _autocast_checks()
    checks.extend(autocast)
    defaults, defaults_snapshot = _default_dtype_checks(autocast_dtype_devices, checks)
    checks.extend(defaults)
    detail = ", ".join(f"{what}={_show(value)}" for what, value in snapshot)
    detail += f", autocast={'off' if not autocast_snapshot else autocast_snapshot}"
    detail += "".join(f", autocast({device}) dtype={_show(dtype)}" for device, dtype in defaults_snapshot)
    key = ("GLOBAL_STATE", snapshot, autocast_snapshot, defaults_snapshot)
    return Guard("GLOBAL_STATE", (), tuple(checks), detail, key)


def process_state(read: Callable[..., Any], args: tuple[Any, ...] = ()) -> Guard:
    """PROCESS_STATE: ``read(*args)`` (a function of torch's process state, such as ``torch.get_num_threads``, with
    constant arguments) returns what it returns now. A trace that took such a value as a constant relies on it."""
    if not callable(read):
        raise TypeError(f"process_state() needs the function that reads the state, got {read!r}")
    call = f"{getattr(read, '__qualname__', None) or short_repr(read)}({', '.join(map(repr, args))})"
    check, value = _reader_check(call, read, args)
    return Guard("PROCESS_STATE", (), (check,), f"{call} == {_show(value)}", ("PROCESS_STATE", read, args, value))


def _backend_name(backend: Any) -> str:
    return getattr(backend, "__name__", None) or short_repr(backend)


def backend_match(get_current: Callable[[], Any], backend: Any) -> Guard:
    """BACKEND_MATCH: ``get_current()`` (the backend currently running, kept by capture) is ``backend``."""
    if not callable(get_current):
        raise TypeError(f"backend_match() needs a function returning the current backend, got {get_current!r}")

    def explain(values: tuple[Any, ...]) -> str:
        return f"backend changed: expected {_backend_name(backend)}, got {_backend_name(get_current())}"

    check = Check(
        "{get_current}() is {backend}", (), Cost.CHEAP, explain, {"get_current": get_current, "backend": backend}
    )
    return Guard(
        "BACKEND_MATCH", (), (check,), f"backend is {_backend_name(backend)}", ("BACKEND", id(get_current), id(backend))
    )


# torch.nn's process-wide module hook registries (those this torch has), consulted by every Module.__call__.
_GLOBAL_HOOK_NAMES = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_forward_hooks_always_called",
)


def global_module_hooks_dicts() -> tuple[Any, ...]:
    """The global nn.Module hook dicts (``register_module_forward_hook`` and the like add to them)."""
    module = torch.nn.modules.module
    return tuple(getattr(module, name) for name in _GLOBAL_HOOK_NAMES if hasattr(module, name))


def global_module_hooks() -> Guard:
    """GLOBAL_MODULE_HOOKS: no global nn.Module hook is registered (a trace that inlined a module call
    relies on it: a hook registered later would run around every module's forward)."""
    dicts = global_module_hooks_dicts()

    def explain(values: tuple[Any, ...]) -> str:
        return "global nn.Module hooks were registered"

    names = [f"hooks_{i}" for i in range(len(dicts))]
    template = " or ".join(f"{{{name}}}" for name in names)
    check = Check(f"not ({template})", (), Cost.CHEAP, explain, dict(zip(names, dicts)))
    return Guard("GLOBAL_MODULE_HOOKS", (), (check,), "no global module hooks", ("GLOBAL_MODULE_HOOKS",))
