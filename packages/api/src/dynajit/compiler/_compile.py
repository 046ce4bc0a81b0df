"""``compile``: resolve the backend, check and bind its mode and options, and hand it to capture."""

from __future__ import annotations

import difflib
import functools
import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

import dynajit.capture as _capture
from dynajit.compiler._registry import accepts_mode_and_options, lookup_backend

__all__ = ["CompileSettings", "backend_catalog", "compile", "resolve_backend"]

_bound: dict[tuple[Any, ...], Callable[..., Any]] = {}


def _freeze(options: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((options or {}).items(), key=lambda kv: kv[0]))


def _backend_name(backend: str | Callable[..., Any], fn: Callable[..., Any]) -> str:
    return backend if isinstance(backend, str) else getattr(fn, "__name__", repr(fn))


def _catalog_owner(fn: Callable[..., Any]) -> Any:
    """The object that describes ``fn``'s modes and options: ``fn`` itself, or the package that defines it.

    A backend describes itself by exposing ``list_mode_options()`` (a mapping whose keys
    are the mode names) and ``list_options()`` (the option names), either as attributes of
    the callable or as functions of the package that defines it (as ``dynajit.inductor_lite`` does).
    """
    if callable(getattr(fn, "list_mode_options", None)) and callable(getattr(fn, "list_options", None)):
        return fn
    module_name = getattr(fn, "__module__", None) or ""
    parts = module_name.split(".")
    for end in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:end]))
        if module is None:
            continue
        if callable(getattr(module, "list_mode_options", None)) and callable(getattr(module, "list_options", None)):
            return module
    return None


def backend_catalog(fn: Callable[..., Any]) -> tuple[list[str], list[str]] | None:
    """Return ``(mode names, option names)`` a backend declares, or None when it declares none."""
    owner = _catalog_owner(fn)
    if owner is None:
        return None
    return list(owner.list_mode_options()), list(owner.list_options())


def _check_mode_and_options(
    name: str, fn: Callable[..., Any], mode: str | None, options: Mapping[str, Any] | None
) -> None:
    catalog = backend_catalog(fn)
    if catalog is None:
        return  # the backend validates its own arguments when it is called
    modes, option_names = catalog
    if mode is not None and mode not in modes:
        raise ValueError(f"unknown mode {mode!r} for backend {name!r}; available modes: {', '.join(map(repr, modes))}")
    for option_name in options or {}:
        if option_name not in option_names:
            close = difflib.get_close_matches(option_name, option_names, n=3)
            hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ValueError(
                f"unknown option {option_name!r} for backend {name!r}.{hint} "
                f"See dynajit.compiler.inductor_list_options() (or the backend's list_options()) for every name."
            )


def resolve_backend(
    backend: str | Callable[..., Any], mode: str | None = None, options: Mapping[str, Any] | None = None
) -> Callable[..., Any]:
    """Return the backend callable for ``backend`` with ``mode`` and ``options`` checked and bound.

    The same (backend, mode, options) always yields the same callable, so
    capture's per-backend cache reuses entries across ``compile`` calls.

    Raises:
        BackendNotFound: an unknown backend name (the message lists the known ones).
        ValueError: a mode or option name the backend does not declare (the message lists
            the modes, or names the closest option names).
        TypeError: ``mode``/``options`` given to a backend that takes neither.
    """
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict of option name to value, got {type(options).__name__}")
    fn = lookup_backend(backend)
    if mode is None and not options:
        return fn
    name = _backend_name(backend, fn)
    if not accepts_mode_and_options(fn):
        raise TypeError(
            f"backend {name!r} does not take mode= or options=; drop them, or use a backend "
            f"whose signature has 'mode' and 'options' keyword arguments (such as 'inductor')"
        )
    _check_mode_and_options(name, fn, mode, options)
    bound = functools.partial(fn, mode=mode, options=dict(options or {}))
    functools.update_wrapper(bound, fn)
    try:
        return _bound.setdefault((fn, mode, _freeze(options)), bound)
    except TypeError:  # an unhashable option value: this compile gets its own bound backend
        return bound


@dataclass(frozen=True)
class CompileSettings:
    """Everything ``compile`` needs to rebuild a compiled callable (kept by ``OptimizedModule`` for pickling)."""

    backend: str | Callable[..., Any] = "inductor"
    fullgraph: bool = False
    dynamic: bool | None = None
    mode: str | None = None
    options: Mapping[str, Any] | None = field(default=None, hash=False)

    def decorator(self) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Resolve the backend and return capture's ``optimize`` decorator for these settings."""
        if self.dynamic not in (None, True, False):
            raise TypeError(f"dynamic must be None, True or False, got {self.dynamic!r}")
        backend_fn = resolve_backend(self.backend, self.mode, self.options)
        return _capture.optimize(backend_fn, fullgraph=bool(self.fullgraph), dynamic=self.dynamic)

    def apply(self, model: Any) -> Any:
        """Compile ``model``: an ``OptimizedModule`` for an ``nn.Module``, a compiled callable otherwise."""
        decorate = self.decorator()
        if isinstance(model, torch.nn.Module):
            module = importlib.import_module("dynajit.compiler._module")
            return module.OptimizedModule(model, self, decorate)
        if not callable(model):
            raise TypeError(
                f"compile expects a function, a method or an nn.Module, got {type(model).__name__}; "
                f"use compile(fn) or the @compile decorator"
            )
        return decorate(model)


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
    """Compile ``model`` (a function, a method or an ``nn.Module``) with dynajit.

    The first call with new input properties (types, dtypes, shapes, ...) reads the
    function's bytecode, captures its tensor operations into FX graphs, and hands each
    graph to ``backend``; later calls whose inputs pass the recorded guards reuse the
    compiled code. Anything capture cannot trace runs as ordinary Python (a graph break).

    Works as a call, ``compile(fn)``, and as a decorator, ``@compile`` or
    ``@compile(backend="eager")``. Backend, mode and option names are checked here, so
    mistakes fail at the ``compile`` call, not at the first run.

    Args:
        model: what to compile. When omitted, returns a decorator taking the model.
        fullgraph: when True, any graph break is an error naming its reason and line.
        dynamic: None compiles static shapes first and turns a dimension dynamic when
            its size changes; True starts dynamic; False always specializes.
        backend: a backend name (see ``list_backends()``) or a callable
            ``(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> callable``.
        mode: the backend's mode: for ``"inductor"`` one of ``"default"``,
            ``"reduce-overhead"``, ``"max-autotune"`` (see ``inductor_list_mode_options()``).
        options: backend options applied for this compile only (see ``inductor_list_options()``).
        disable: when True, return ``model`` unchanged (a switch to turn compilation off).

    Returns:
        The compiled function (same signature), or an ``OptimizedModule`` wrapping an
        ``nn.Module``; a decorator when ``model`` is omitted.

    Raises:
        BackendNotFound: unknown backend name; the message lists the available backends.
        ValueError: unknown mode (lists the modes) or option name (names close matches).
        TypeError: ``mode``/``options`` for a backend that takes neither, or a ``model``
            that is not callable.

    Example:
        >>> import torch, dynajit.compiler
        >>> @dynajit.compiler.compile(backend="eager")
        ... def f(x):
        ...     return torch.sin(x) + 1
        >>> f(torch.zeros(2))
        tensor([1., 1.])
    """
    settings = CompileSettings(backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options)
    if model is None:
        if not disable:
            resolve_backend(backend, mode, options)  # fail at the decorator line, not at decoration
        return functools.partial(
            compile, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode, options=options, disable=disable
        )
    if disable:
        return model
    return settings.apply(model)
