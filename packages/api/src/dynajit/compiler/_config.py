"""``dynajit.compiler.config``: the documented handle on capture's typed configuration.

Capture's ``config`` object is the one source of truth for how frames are
captured; this view forwards every read, write and ``patch`` to it, looked up
when used, so ``import dynajit.compiler`` does not depend on capture's import order.
The backend's own settings live in its config (``dynajit.inductor_lite.config``)
and are set per compile with ``compile(options=...)``.
"""

from __future__ import annotations

from typing import Any

import dynajit.capture as _capture

__all__ = ["CompilerConfig", "config"]


class CompilerConfig:
    """Capture's settings (``dynajit.capture.config``): set, patch or override from the environment.

    Fields can be set in code (``config.cache_size_limit = 16``), patched for a block
    (``with config.patch(cache_size_limit=16): ...``, also a decorator) or overridden
    by ``DYNAJIT_<FIELD>`` environment variables read at import. Unknown field names
    raise an error naming the close matches; ``config.describe()`` documents every field.

    Example:
        >>> import dynajit.compiler
        >>> with dynajit.compiler.config.patch(cache_size_limit=4):
        ...     dynajit.compiler.config.cache_size_limit
        4
    """

    @staticmethod
    def _target() -> Any:
        return _capture.config

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._target(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target(), name, value)

    def __dir__(self) -> list[str]:
        return dir(self._target())

    def __repr__(self) -> str:
        return repr(self._target())


config = CompilerConfig()
