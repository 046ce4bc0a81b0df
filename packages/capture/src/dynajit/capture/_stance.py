"""The compiler stance: whether compiled functions compile, run eagerly, or refuse to recompile.

``set_stance`` changes it for the whole process immediately, restores it at
the end of a ``with`` block, and, used as a decorator, applies it only while
the decorated function runs. The runtime listens for changes so that
``force_eager`` costs nothing on the hot path (the dispatchers are
regenerated to call the original function directly).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["STANCES", "current_stance", "on_stance_change", "set_stance"]

_F = TypeVar("_F", bound=Callable[..., Any])

STANCES: dict[str, str] = {
    "default": "compile on the first call and recompile when guards fail",
    "force_eager": "ignore compilation: every compiled function runs its original code",
    "eager_on_recompile": "use cached compiled code when its guards pass, run eagerly instead of recompiling",
    "fail_on_recompile": "use cached compiled code when its guards pass, raise instead of recompiling",
}

_current = "default"
_listeners: list[Callable[[str, str], None]] = []


def current_stance() -> str:
    """The stance in effect (one of :data:`STANCES`)."""
    return _current


def on_stance_change(listener: Callable[[str, str], None]) -> None:
    """Call ``listener(old, new)`` whenever the stance changes."""
    _listeners.append(listener)


def _apply(stance: str) -> None:
    global _current
    old, _current = _current, stance
    if old != stance:
        for listener in _listeners:
            listener(old, stance)


class _StanceSetting(contextlib.ContextDecorator):
    """The result of :func:`set_stance`: already in effect; restores the previous stance on ``__exit__``."""

    def __init__(self, stance: str) -> None:
        self.stance = stance
        self.previous = _current
        _apply(stance)

    def __enter__(self) -> _StanceSetting:
        return self

    def __exit__(self, *exc: object) -> None:
        _apply(self.previous)

    def __call__(self, fn: _F) -> _F:  # type: ignore[override]
        # As a decorator the stance applies only inside fn, so undo the immediate change.
        _apply(self.previous)
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args: Any, **kwargs: Any) -> Any:
            previous = _current
            _apply(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _apply(previous)

        return with_stance  # type: ignore[return-value]


def set_stance(stance: str = "default") -> _StanceSetting:
    """Set how compiled functions behave: ``default``, ``force_eager``, ``eager_on_recompile``, ``fail_on_recompile``.

    ``set_stance("force_eager")`` takes effect at once for the whole process;
    ``with set_stance("force_eager"): ...`` restores the previous stance at the
    end of the block; ``@set_stance("force_eager")`` applies it only while the
    decorated function runs.

    Raises:
        ValueError: an unknown stance (the message lists the known ones).
    """
    if stance not in STANCES:
        known = "; ".join(f"{name!r}: {doc}" for name, doc in STANCES.items())
        raise ValueError(f"unknown stance {stance!r}; known stances: {known}")
    return _StanceSetting(stance)
