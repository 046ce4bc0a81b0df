"""Marks users put on functions, modules and tensors, and the registries the symbolic interpreter consults.

Function marks (``disable``, ``allow_in_graph``, ``nonstrict_trace``, ...)
are kept in identity-keyed registries, so marking never changes the user's
function. Tensor marks (``mark_dynamic`` and friends) are recorded as
attributes on the tensor itself, the way ``torch.compile`` does, so they
travel with it. The queries (``is_disabled``, ``dynamic_dims``, ...) are what
the interpreter and the runtime read.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import torch

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "can_constant_fold_through",
    "compiling",
    "compiling_state",
    "disable",
    "disallow_in_graph",
    "dynamic_dims",
    "graph_break",
    "has_constant_result",
    "is_allowed_in_graph",
    "is_compiling",
    "is_disabled",
    "is_disabled_frame_only",
    "is_disallowed_in_graph",
    "is_dynamo_compiling",
    "is_exporting",
    "is_marked_static",
    "is_nonstrict_traced",
    "is_torch_disabled",
    "mark_dynamic",
    "mark_static",
    "mark_static_address",
    "maybe_mark_dynamic",
    "nonstrict_trace",
    "static_address_kind",
    "static_dims",
    "substitute_for",
    "substitute_in_graph",
    "weak_dynamic_dims",
]

_F = TypeVar("_F", bound=Callable[..., Any])


class _Registry:
    """A set of objects compared by identity (works for unhashable callables; keeps members alive)."""

    def __init__(self) -> None:
        self._members: dict[int, Any] = {}

    def add(self, obj: Any) -> None:
        self._members[id(obj)] = obj

    def discard(self, obj: Any) -> None:
        self._members.pop(id(obj), None)

    def __contains__(self, obj: Any) -> bool:
        return id(obj) in self._members


_disabled = _Registry()
_disabled_frame_only = _Registry()
_allowed = _Registry()
_disallowed = _Registry()
_nonstrict = _Registry()
_constant_result = _Registry()
_static_modules = _Registry()
_substitutes: dict[int, tuple[Any, Callable[..., Any], bool]] = {}


def _target(fn: Any) -> Any:
    """The object a mark is recorded on: a bound method's function, anything else itself."""
    return fn.__func__ if type(fn) is types.MethodType else fn


def _require_callable(fn: Any, api: str) -> None:
    if not callable(fn):
        raise TypeError(f"{api} expects a function, method or nn.Module, got {type(fn).__name__} {fn!r}")


# ---------------------------------------------------------------- function marks


def disable(fn: _F | None = None, *, recursive: bool = True) -> Any:
    """Run ``fn`` without compiling it.

    ``disable(fn)`` (or ``@disable``): ``fn`` and everything it calls run
    eagerly. Compiled code calling ``fn`` breaks the graph at the call and
    calls ``fn`` un-intercepted; compiling ``fn`` itself gives back ``fn``.
    Functions ``fn`` calls that were themselves explicitly compiled still run
    compiled.

    ``disable(fn, recursive=False)``: ``fn``'s own frame is not traced, but
    the functions it calls are still intercepted and compiled.

    The mark is recorded in a registry (``fn`` is returned unchanged); for a
    bound method it applies to the underlying function, i.e. to every instance.
    For an ``nn.Module`` instance it applies to calls of that module.

    Args:
        fn: the function, method or module; omit it to get a decorator
            (``@disable(recursive=False)``).
        recursive: False to leave only ``fn``'s own frame alone.

    Returns:
        ``fn`` itself (or a decorator when ``fn`` is omitted).
    """
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    _require_callable(fn, "disable")
    target = _target(fn)
    if recursive:
        _disabled.add(target)
        _disabled_frame_only.discard(target)
    else:
        _disabled_frame_only.add(target)
        _disabled.discard(target)
    return fn


# The code of the wrapper ``torch._disable_dynamo(fn)`` returns: torch marks functions it keeps out of compiled
# graphs this way (``Optimizer.zero_grad``, ``torch.utils.checkpoint.checkpoint``). Tracing into the wrapper
# would read compiler state of torch's own; the mark means the call runs in Python.
_TORCH_DISABLED_CODE = torch._disable_dynamo(lambda: None).__code__


def is_torch_disabled(fn: Any) -> bool:
    """True when ``fn`` is a wrapper made by ``torch._disable_dynamo``: it and everything it calls run eagerly."""
    return getattr(_target(fn), "__code__", None) is _TORCH_DISABLED_CODE


def is_disabled(fn: Any) -> bool:
    """True when ``fn`` was marked with ``disable(fn)``, or by torch with ``torch._disable_dynamo``: never trace
    it or anything it calls."""
    target = _target(fn)
    members = _disabled._members
    if id(target) in members or is_torch_disabled(target):
        return True
    if isinstance(target, torch.nn.Module):
        return id(type(target).__dict__.get("forward")) in members
    return False


def is_disabled_frame_only(fn: Any) -> bool:
    """True when ``fn`` was marked with ``disable(fn, recursive=False)``: skip its frame, intercept its callees."""
    return _target(fn) in _disabled_frame_only


def _mark_each(fns: Any, api: str, add: _Registry, remove: _Registry | None = None) -> Any:
    for fn in fns if isinstance(fns, (list, tuple)) else (fns,):
        _require_callable(fn, api)
        add.add(_target(fn))
        if remove is not None:
            remove.discard(_target(fn))
    return fns


def allow_in_graph(fn: _F) -> _F:
    """Put calls to ``fn`` into the graph as a single node, without tracing into it.

    ``fn`` must be safe to run on fake tensors (no data-dependent Python
    control flow) and free of side effects on Python state. Accepts a list or
    tuple of functions. Returns ``fn`` unchanged.
    """
    return _mark_each(fn, "allow_in_graph", _allowed, _disallowed)


def disallow_in_graph(fn: _F) -> _F:
    """Never put ``fn`` into a graph: a call to it is a graph break and runs in Python. Returns ``fn``."""
    return _mark_each(fn, "disallow_in_graph", _disallowed, _allowed)


def is_allowed_in_graph(fn: Any) -> bool:
    """True when ``allow_in_graph(fn)`` was called."""
    return _target(fn) in _allowed


def is_disallowed_in_graph(fn: Any) -> bool:
    """True when ``disallow_in_graph(fn)`` was called."""
    return _target(fn) in _disallowed


def graph_break(msg: str = "") -> None:
    """Break the graph here when traced; does nothing when run eagerly.

    Args:
        msg: a reason shown in the ``graph_breaks`` log.
    """


def nonstrict_trace(fn: _F) -> _F:
    """Trace ``fn`` non-strictly: its tensor operations go in the graph, its Python runs at trace time.

    Use it for functions whose Python logic the interpreter does not support
    but whose tensor code is pure. Returns ``fn`` unchanged.
    """
    _require_callable(fn, "nonstrict_trace")
    _nonstrict.add(_target(fn))
    return fn


def is_nonstrict_traced(fn: Any) -> bool:
    """True when ``nonstrict_trace(fn)`` was called."""
    return _target(fn) in _nonstrict


def assume_constant_result(fn: _F) -> _F:
    """Call ``fn`` once at trace time and use its result as a constant in the graph.

    Only for functions whose result never changes between calls (it is not
    guarded). Returns ``fn`` unchanged.
    """
    _require_callable(fn, "assume_constant_result")
    _constant_result.add(_target(fn))
    return fn


def has_constant_result(fn: Any) -> bool:
    """True when ``assume_constant_result(fn)`` was called, or ``fn`` carries TorchDynamo's mark of it.

    Libraries that must not import torch set that attribute themselves (transformers' install probes, such
    as ``is_torch_distributed_available``, which read package metadata at every call they trace).
    """
    if type(fn) is types.FunctionType:  # (the common case: a function's attributes are its own __dict__'s)
        marked = fn.__dict__.get("_dynamo_marked_constant", False) is True
    else:
        marked = inspect.getattr_static(fn, "_dynamo_marked_constant", False) is True
    return marked or _target(fn) in _constant_result


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def substitute_in_graph(
    original_fn: Callable[..., Any], *, can_constant_fold_through: bool = False, skip_signature_check: bool = False
) -> Callable[[_F], _F]:
    """Register a traceable Python stand-in for ``original_fn`` (typically a C function).

    When compiled code calls ``original_fn``, the interpreter traces the
    substitute instead. Eagerly, the decorated function calls
    ``original_fn`` itself, so the fast original keeps running outside compilation.

    Args:
        original_fn: the function to stand in for.
        can_constant_fold_through: the interpreter may evaluate the call at
            trace time when all arguments are constants.
        skip_signature_check: accept a substitute whose signature differs
            from ``original_fn``'s.

    Returns:
        A decorator taking the substitute and returning a function that calls ``original_fn``.

    Raises:
        ValueError: ``original_fn`` already has a substitute.
        TypeError: the signatures differ (and ``skip_signature_check`` is False).
    """
    _require_callable(original_fn, "substitute_in_graph")
    if id(_target(original_fn)) in _substitutes:
        raise ValueError(f"{original_fn!r} already has a substitute registered with substitute_in_graph")

    def register(substitute: _F) -> _F:
        _require_callable(substitute, "substitute_in_graph(...)")
        if not skip_signature_check:
            expected, got = _signature(original_fn), _signature(substitute)
            if expected is not None and got is not None and expected != got:
                raise TypeError(
                    f"substitute {getattr(substitute, '__qualname__', substitute)!r} has signature {got}, but "
                    f"{getattr(original_fn, '__qualname__', original_fn)!r} has {expected}; make them match "
                    "or pass skip_signature_check=True"
                )

        @functools.wraps(substitute)
        def calls_original(*args: Any, **kwargs: Any) -> Any:
            return original_fn(*args, **kwargs)

        entry = (original_fn, substitute, can_constant_fold_through)
        _substitutes[id(_target(original_fn))] = entry
        _substitutes[id(calls_original)] = (calls_original, substitute, can_constant_fold_through)
        return calls_original  # type: ignore[return-value]

    return register


def substitute_for(fn: Any) -> Callable[..., Any] | None:
    """The substitute registered for ``fn`` with ``substitute_in_graph``, or None."""
    entry = _substitutes.get(id(_target(fn)))
    return None if entry is None or entry[0] is not _target(fn) else entry[1]


def can_constant_fold_through(fn: Any) -> bool:
    """True when ``fn``'s substitute was registered with ``can_constant_fold_through=True``."""
    entry = _substitutes.get(id(_target(fn)))
    return entry is not None and entry[0] is _target(fn) and entry[2]


# ---------------------------------------------------------------- compiling state


class _CompilingState(threading.local):
    """Per-thread flags: a frame is being converted (``compiling``) for ``export`` (``exporting``)."""

    compiling = False
    exporting = False


_state = _CompilingState()


def compiling_state() -> _CompilingState:
    """This thread's compilation state: ``.compiling`` and ``.exporting`` flags, set while a frame converts."""
    return _state


@contextlib.contextmanager
def compiling(*, exporting: bool = False) -> Iterator[None]:
    """Mark this thread as compiling (and exporting) for the duration of the block."""
    saved = (_state.compiling, _state.exporting)
    _state.compiling, _state.exporting = True, exporting
    try:
        yield
    finally:
        _state.compiling, _state.exporting = saved


def is_compiling() -> bool:
    """True while code is being traced by dynajit (compile or export); False when it runs eagerly."""
    return _state.compiling


def is_dynamo_compiling() -> bool:
    """True while dynajit's bytecode interpreter traces the code (the same as :func:`is_compiling` here)."""
    return _state.compiling


def is_exporting() -> bool:
    """True while code is being traced by ``export``."""
    return _state.exporting


_MISSING_QUERY = object()


def is_tracing_query(fn: Any) -> bool:
    """True for a library function asking whether its caller is being traced, answered True while tracing.

    ``nn.MultiheadAttention`` asks it (``_is_make_fx_tracing``) before its fused inference kernel: traced code
    takes the composite path instead, as under TorchDynamo, rather than reading the tracer's fake-tensor mode
    off the dispatch stack.
    """
    return fn is getattr(torch.nn.modules.activation, "_is_make_fx_tracing", _MISSING_QUERY)


# ---------------------------------------------------------------- tensor and module marks

_DYNAMIC = "_dynajit_dynamic_dims"
_WEAK_DYNAMIC = "_dynajit_weak_dynamic_dims"
_STATIC = "_dynajit_static_dims"
_STATIC_ADDRESS = "_dynajit_static_address"


def _dims(t: torch.Tensor, dim: int | Iterable[int], api: str) -> list[int]:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{api} expects a tensor, got {type(t).__name__}")
    dims = [dim] if isinstance(dim, int) else list(dim)
    normalized = []
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{api}: dimensions must be ints, got {d!r}")
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"{api}: dimension {d} is out of range for a tensor with {t.dim()} dimensions")
        normalized.append(d % t.dim())
    return normalized


def _mark_dims(t: torch.Tensor, attr: str, dims: list[int], value: Any = None) -> None:
    marks = t.__dict__.setdefault(attr, {} if value is not None else set())
    for d in dims:
        if isinstance(marks, dict):
            marks[d] = value
        else:
            marks.add(d)


def _unmark_dims(t: torch.Tensor, attr: str, dims: list[int]) -> None:
    marks = t.__dict__.get(attr)
    for d in dims:
        if isinstance(marks, set):
            marks.discard(d)
        elif isinstance(marks, dict):
            marks.pop(d, None)


def mark_dynamic(t: torch.Tensor, dim: int | Iterable[int], min: int | None = None, max: int | None = None) -> None:
    """Mark dimension(s) ``dim`` of ``t`` dynamic: compile them symbolically from the first compilation.

    Args:
        t: the tensor (an input of the compiled function).
        dim: a dimension or a list of dimensions (negative counts from the end).
        min: the smallest size the dimension may take (optional).
        max: the largest size the dimension may take (optional).

    Raises:
        IndexError: ``dim`` is out of range; ValueError: ``min > max``.
    """
    dims = _dims(t, dim, "mark_dynamic")
    if min is not None and max is not None and min > max:
        raise ValueError(f"mark_dynamic: min ({min}) is larger than max ({max})")
    _mark_dims(t, _DYNAMIC, dims, (min, max))
    _unmark_dims(t, _STATIC, dims)


def maybe_mark_dynamic(t: torch.Tensor, dim: int | Iterable[int]) -> None:
    """Hint that dimension(s) ``dim`` of ``t`` may change; unlike ``mark_dynamic``, specializing is not an error."""
    _mark_dims(t, _WEAK_DYNAMIC, _dims(t, dim, "maybe_mark_dynamic"))


def mark_static(t: Any, dim: int | Iterable[int] | None = None) -> None:
    """Keep dimension(s) of a tensor static (all of them when ``dim`` is None), or mark an ``nn.Module`` static.

    A static module's integer and float attributes are guarded and
    specialized rather than treated as changing inputs.
    """
    if isinstance(t, torch.nn.Module):
        if dim is not None:
            raise TypeError("mark_static: dim is only meaningful for a tensor, not an nn.Module")
        _static_modules.add(t)
        return
    dims = _dims(t, range(t.dim()) if dim is None else dim, "mark_static")
    _mark_dims(t, _STATIC, dims)
    _unmark_dims(t, _DYNAMIC, dims)
    _unmark_dims(t, _WEAK_DYNAMIC, dims)


def mark_static_address(t: torch.Tensor, guard: bool = True) -> None:
    """Mark ``t``'s storage address as fixed (e.g. a buffer updated in place), so backends may bake it in.

    Args:
        t: the tensor.
        guard: guard on the address (recompile if another tensor is passed); False trusts the caller.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"mark_static_address expects a tensor, got {type(t).__name__}")
    t.__dict__[_STATIC_ADDRESS] = "guarded" if guard else "unguarded"


def dynamic_dims(t: torch.Tensor) -> dict[int, tuple[int | None, int | None]]:
    """``mark_dynamic`` marks of ``t``: dimension -> (min, max)."""
    return dict(t.__dict__.get(_DYNAMIC, {}))


def weak_dynamic_dims(t: torch.Tensor) -> frozenset[int]:
    """``maybe_mark_dynamic`` marks of ``t``."""
    return frozenset(t.__dict__.get(_WEAK_DYNAMIC, ()))


def static_dims(t: torch.Tensor) -> frozenset[int]:
    """``mark_static`` marks of ``t``."""
    return frozenset(t.__dict__.get(_STATIC, ()))


def static_address_kind(t: torch.Tensor) -> str | None:
    """``"guarded"`` or ``"unguarded"`` after ``mark_static_address``, else None."""
    return t.__dict__.get(_STATIC_ADDRESS)


def is_marked_static(obj: Any) -> bool:
    """True for an ``nn.Module`` passed to ``mark_static``."""
    return obj in _static_modules
