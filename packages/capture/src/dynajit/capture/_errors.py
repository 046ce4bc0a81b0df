"""The exceptions and warning a compiled function raises instead of running its frame compiled.

Each says which function and why: a failed conversion or backend compile, strict mode's refusal of a
fallback to eager, a recompile the stance forbids, a function past its cache size limit.
"""

from __future__ import annotations

__all__ = ["InternalCompilerError", "RecompileError", "RecompileLimitWarning", "StrictModeError"]


class RecompileLimitWarning(UserWarning):
    """A function reached ``config.cache_size_limit`` compiled entries and now runs eagerly on new inputs."""


class InternalCompilerError(RuntimeError):
    """Converting a frame failed inside dynajit (raised under ``fullgraph=True``; otherwise a warning)."""


class StrictModeError(RuntimeError):
    """Under ``config.strict``, a frame that would have run eagerly instead of compiled.

    Its conversion or backend compile failed (the cause is chained), or it reached ``config.cache_size_limit``.
    The message names the function (qualified name, ``file:line``) and why. Graph breaks are not fallbacks.

    Example:
        >>> import torch, dynajit.capture as capture
        >>> def broken_backend(gm, example_inputs):
        ...     raise ValueError("no kernel")
        >>> f = capture.optimize(broken_backend)(lambda x: x + 1)
        >>> with capture.config.patch(strict=True):
        ...     f(torch.ones(2))
        Traceback (most recent call last):
        ...
        dynajit.capture._errors.StrictModeError: dynajit (strict mode): compiling '<lambda>' ...
    """


class RecompileError(RuntimeError):
    """A recompilation was needed while the stance is ``fail_on_recompile``."""
