"""The backend registry: backend names resolved to callables.

Backends come from two roads that meet here: ``register_backend`` at run time,
and the ``dynajit.backends`` entry-point group (built-in and third-party alike).
Entry points are read lazily, on the first name lookup, and read again when a
name is not found, so a backend installed after import is still found.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import inspect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = ["BackendNotFound", "list_backends", "lookup_backend", "register_backend"]

ENTRY_POINT_GROUP = "dynajit.backends"
Backend = Callable[..., Any]
_B = TypeVar("_B", bound=Backend)

_lock = threading.Lock()
_registered: dict[str, Backend] = {}
_tags: dict[str, tuple[str, ...]] = {}
_entry_points: dict[str, importlib.metadata.EntryPoint] | None = None


class BackendNotFound(KeyError, LookupError):
    """A backend name that no registration and no entry point provides."""

    def __str__(self) -> str:
        return str(self.args[0])


def register_backend(compiler_fn: _B | None = None, name: str | None = None, tags: Sequence[str] = ()) -> Any:
    """Register ``compiler_fn`` as a backend under ``name`` (default: its ``__name__``).

    Usable as a call, ``register_backend(my_backend, "mine")`` (or
    ``register_backend("mine", my_backend)``), or as a decorator,
    ``@register_backend`` / ``@register_backend(name="mine", tags=("debug",))``.

    Args:
        compiler_fn: a callable ``(gm: torch.fx.GraphModule, example_inputs) -> callable``.
        name: the name users pass as ``compile(backend=name)``.
        tags: labels such as ``"debug"`` or ``"experimental"``; ``list_backends``
            hides backends tagged with its ``exclude_tags``.

    Returns:
        ``compiler_fn`` unchanged (or a decorator that registers and returns it).

    Raises:
        ValueError: the name is already taken by another backend.

    Example:
        >>> import dynajit._dynamo
        >>> @dynajit._dynamo.register_backend(name="print_graph", tags=("debug",))
        ... def print_graph(gm, example_inputs):
        ...     print(gm.code)
        ...     return gm.forward
    """
    if isinstance(compiler_fn, str) and (name is None or callable(name)):
        compiler_fn, name = name, compiler_fn  # the (name, fn) order
    if compiler_fn is None:
        return functools.partial(register_backend, name=name, tags=tags)
    if not callable(compiler_fn):
        raise TypeError(f"register_backend expects a callable backend, got {type(compiler_fn).__name__}")
    key = name or getattr(compiler_fn, "__name__", None)
    if not key:
        raise ValueError("register_backend needs a name for a callable without __name__")
    with _lock:
        existing = _registered.get(key)
        if existing is not None and existing is not compiler_fn:
            raise ValueError(f"a backend named {key!r} is already registered ({existing!r})")
        _registered[key] = compiler_fn
        _tags[key] = tuple(tags) or tuple(getattr(compiler_fn, "_dynajit_backend_tags", ()))
    return compiler_fn


def _read_entry_points(refresh: bool) -> dict[str, importlib.metadata.EntryPoint]:
    if refresh:
        importlib.invalidate_caches()  # see distributions installed since the last read
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _known_entry_points(refresh: bool = False) -> dict[str, importlib.metadata.EntryPoint]:
    global _entry_points
    with _lock:
        if _entry_points is None or refresh:
            _entry_points = _read_entry_points(refresh)
        return _entry_points


def _load(name: str, entry_point: importlib.metadata.EntryPoint) -> Backend:
    try:
        backend = entry_point.load()
    except Exception as exc:
        raise ImportError(
            f"backend {name!r} is declared by entry point {entry_point.value!r} "
            f"({ENTRY_POINT_GROUP}) but failed to load: {exc}"
        ) from exc
    if not callable(backend):
        raise TypeError(f"entry point {entry_point.value!r} for backend {name!r} is not callable")
    with _lock:
        _registered.setdefault(name, backend)
        _tags.setdefault(name, tuple(getattr(backend, "_dynajit_backend_tags", ())))
        return _registered[name]


def lookup_backend(backend: str | Backend) -> Backend:
    """Resolve a backend name (or pass a backend callable through) to its callable.

    Args:
        backend: a registered name such as ``"inductor"`` or ``"eager"``, or a callable.

    Returns:
        The backend callable.

    Raises:
        BackendNotFound: no registration or entry point provides the name; the
            message lists the known backends and the closest matches.

    Example:
        >>> import dynajit._dynamo
        >>> dynajit._dynamo.lookup_backend("eager").__name__
        'eager'
    """
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    if backend in _registered:
        return _registered[backend]
    for refresh in (False, True):
        entry_point = _known_entry_points(refresh).get(backend)
        if entry_point is not None:
            return _load(backend, entry_point)
    known = _all_names()
    close = difflib.get_close_matches(backend, known, n=3)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise BackendNotFound(
        f"unknown backend {backend!r}.{hint} Known backends: {', '.join(known)}. "
        f"Register one with dynajit._dynamo.register_backend(fn, name) or through the "
        f"{ENTRY_POINT_GROUP!r} entry-point group."
    )


def _all_names() -> list[str]:
    return sorted(set(_registered) | set(_known_entry_points()))


def list_backends(exclude_tags: Iterable[str] | None = ("debug", "experimental")) -> list[str]:
    """Return the names of the available backends, sorted.

    Args:
        exclude_tags: hide backends carrying any of these tags; ``None`` shows all.

    Returns:
        Backend names usable as ``compile(backend=name)``.

    Example:
        >>> import dynajit.compiler
        >>> "inductor" in dynajit.compiler.list_backends()
        True
        >>> "eager" in dynajit.compiler.list_backends(exclude_tags=None)
        True
    """
    excluded = set(exclude_tags or ())
    names = _all_names()
    if not excluded:
        return names
    entry_points = _known_entry_points()
    shown = []
    for name in names:
        if name not in _tags and name in entry_points:
            try:
                _load(name, entry_points[name])
            except Exception:
                pass  # listed anyway: lookup_backend will report the load error
        if not excluded & set(_tags.get(name, ())):
            shown.append(name)
    return shown


def accepts_mode_and_options(backend: Backend) -> bool:
    """True when ``backend`` takes ``mode`` and ``options`` keyword arguments."""
    try:
        parameters = inspect.signature(backend).parameters
    except (TypeError, ValueError):
        return False
    return "mode" in parameters and "options" in parameters


def _reset_for_tests() -> None:
    global _entry_points
    with _lock:
        _registered.clear()
        _tags.clear()
        _entry_points = None
