"""``compile``: resolve the backend, bind its mode and options, and hand it to capture."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch

from dynajit.compiler._registry import accepts_mode_and_options, lookup_backend

__all__ = ["compile", "resolve_backend"]

_bound: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _freeze(options: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((options or {}).items(), key=lambda kv: kv[0]))


def resolve_backend(
    backend: str | Callable[..., Any], mode: str | None = None, options: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """Return the backend callable for ``backend`` with ``mode`` and ``options`` bound.

    The same (backend, mode, options) always yields the same callable, so
    capture's per-backend cache reuses entries across ``compile`` calls.
    """
    fn = lookup_backend(backend)
    if mode is None and not options:
        return fn
    if not accepts_mode_and_options(fn):
        name = backend if isinstance(backend, str) else getattr(fn, "__name__", repr(fn))
        raise TypeError(
            f"backend {name!r} does not take mode= or options=; drop them, or use a backend "
            f"whose signature has 'mode' and 'options' keyword arguments (such as 'inductor')"
        )
    key = (id(fn), mode, _freeze(options))
    if key not in _bound:
        bound = functools.partial(fn, mode=mode, options=dict(options or {}))
        functools.update_wrapper(bound, fn)
        _bound[key] = bound
    return _bound[key]


def compile(
    model: Callable[..., Any] | None = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: str | Callable[..., Any] = "inductor",
    mode: str | None = None,
    options: Mapping[str, Any] | None = None,
    disable: bool = False,
) -> Any:
    """Compile ``model`` (a function, method or ``nn.Module``) with dynajit.

    Args:
        model: what to compile. When omitted, returns a decorator.
        fullgraph: when True, any graph break is an error naming its reason and line.
        dynamic: None compiles static shapes first and turns a dimension dynamic
            when its size changes; True starts dynamic; False never does.
        backend: a backend name (see ``list_backends()``) or a callable
            ``(gm, example_inputs) -> callable``.
        mode: the backend's mode, e.g. ``"default"``, ``"reduce-overhead"``, ``"max-autotune"``.
        options: backend options, applied for this compile only.
        disable: when True, return ``model`` unchanged (a no-op switch).

    Returns:
        The compiled function, or an ``OptimizedModule`` for an ``nn.Module``.

    Example:
        >>> import torch, dynajit.compiler
        >>> @dynajit.compiler.compile(backend="eager")
        ... def f(x):
        ...     return torch.sin(x) + 1
        >>> f(torch.zeros(2))
        tensor([1., 1.])
    """
    if model is None:
        return functools.partial(
            compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if disable:
        return model
    backend_fn = resolve_backend(backend, mode, options)
    from dynajit.capture import optimize

    decorate = optimize(backend_fn, fullgraph=fullgraph, dynamic=dynamic)
    if isinstance(model, torch.nn.Module):
        from dynajit.compiler._module import OptimizedModule

        return OptimizedModule(model, decorate)
    return decorate(model)
