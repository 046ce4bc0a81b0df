"""Typed configuration objects shared by every dynajit layer.

Each layer declares one subclass of :class:`Config` whose fields are the single
source of truth for that layer's settings. A field can be set in code
(``config.cache_size_limit = 16``), patched for a block
(``with config.patch(cache_size_limit=16): ...``) or overridden from the
environment (``DYNAJIT_CACHE_SIZE_LIMIT=16``).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import os
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

__all__ = ["Config", "ConfigError", "option"]

_F = TypeVar("_F", bound=Callable[..., Any])


class ConfigError(AttributeError, TypeError):
    """An unknown config field, or a value of the wrong type."""


@dataclass(frozen=True)
class _Option:
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None


def option(default: Any, doc: str, *, choices: tuple[Any, ...] | None = None) -> Any:
    """Declare a config field with its default, its documentation and optional allowed values."""
    return _Option(default, doc, choices)


def _parse_env(raw: str, kind: type, name: str) -> Any:
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise ConfigError(f"environment variable for {name!r}: expected a boolean (1/0/true/false), got {raw!r}")
    if kind in (int, float, str):
        try:
            return kind(raw)
        except ValueError:
            raise ConfigError(f"environment variable for {name!r}: expected {kind.__name__}, got {raw!r}") from None
    return raw


class Config:
    """Base of a layer's typed configuration.

    Subclasses declare fields as annotated class attributes built with
    :func:`option`. Instances read ``<env_prefix><FIELD>`` environment
    variables once, when created.
    """

    env_prefix: ClassVar[str] = "DYNAJIT_"
    _options: ClassVar[dict[str, tuple[type, _Option]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hints = typing.get_type_hints(cls)
        options = dict(getattr(cls, "_options", {}))
        for name, value in list(vars(cls).items()):
            if isinstance(value, _Option):
                kind = hints.get(name, type(value.default))
                options[name] = (_runtime_type(kind, value.default), value)
                delattr(cls, name)
        cls._options = options

    def __init__(self) -> None:
        values: dict[str, Any] = {}
        for name, (kind, opt) in self._options.items():
            raw = os.environ.get(self.env_prefix + name.upper())
            values[name] = opt.default if raw is None else _parse_env(raw, kind, name)
            self._validate(name, values[name])
        object.__setattr__(self, "_values", values)

    def _validate(self, name: str, value: Any) -> None:
        kind, opt = self._options[name]
        if value is not None and kind is not object and not isinstance(value, kind):
            if not (kind is float and isinstance(value, int) and not isinstance(value, bool)):
                raise ConfigError(f"config field {name!r} takes {kind.__name__}, got {type(value).__name__} {value!r}")
        if opt.choices is not None and value not in opt.choices:
            raise ConfigError(f"config field {name!r} takes one of {list(opt.choices)}, got {value!r}")

    def _unknown(self, name: str) -> ConfigError:
        close = difflib.get_close_matches(name, self._options, n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        known = ", ".join(sorted(self._options))
        return ConfigError(f"{type(self).__name__} has no field {name!r}{hint} Known fields: {known}")

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values")
        if values is not None and name in values:
            return values[name]
        raise self._unknown(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self._options:
            raise self._unknown(name)
        self._validate(name, value)
        self._values[name] = value

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._options))

    def check_names(self, names: Mapping[str, Any] | list[str]) -> None:
        """Raise :class:`ConfigError` naming close matches for the first unknown name."""
        for name in names:
            if name not in self._options:
                raise self._unknown(name)

    def to_dict(self) -> dict[str, Any]:
        """Return the current value of every field."""
        return dict(self._values)

    def describe(self) -> dict[str, str]:
        """Return each field's documentation, keyed by field name."""
        return {name: opt.doc for name, (_, opt) in self._options.items()}

    def defaults(self) -> dict[str, Any]:
        """Return each field's declared default (before environment overrides)."""
        return {name: opt.default for name, (_, opt) in self._options.items()}

    def patch(self, changes: Mapping[str, Any] | None = None, **kwargs: Any) -> _Patch:
        """Set fields for the duration of a ``with`` block or a decorated function call.

        Unknown names and ill-typed values are rejected before anything changes.
        """
        merged = {**(changes or {}), **kwargs}
        self.check_names(merged)
        for name, value in merged.items():
            self._validate(name, value)
        return _Patch(self, merged)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self._values.items())
        return f"{type(self).__name__}({fields})"


class _Patch(contextlib.ContextDecorator):
    def __init__(self, config: Config, changes: dict[str, Any]) -> None:
        self._config = config
        self._changes = changes
        self._saved: list[dict[str, Any]] = []

    def __enter__(self) -> Config:
        values = self._config._values
        self._saved.append({name: values[name] for name in self._changes})
        values.update(self._changes)
        return self._config

    def __exit__(self, *exc: object) -> None:
        self._config._values.update(self._saved.pop())

    def __call__(self, fn: _F) -> _F:  # type: ignore[override]
        @functools.wraps(fn)
        def patched(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return typing.cast(_F, patched)


def _runtime_type(annotation: Any, default: Any) -> type:
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is getattr(__import__("types"), "UnionType", None):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return members[0] if len(members) == 1 and isinstance(members[0], type) else object
    if origin is typing.Literal:
        return type(typing.get_args(annotation)[0])
    if isinstance(annotation, type):
        return annotation
    return object if default is None else type(default)


def iter_env_names(config: Config) -> Iterator[str]:
    """Yield the environment variable name of every field of ``config``."""
    for name in config._options:
        yield config.env_prefix + name.upper()
