"""Log artifacts: one standard ``logging`` logger per kind of debug output.

Every layer logs its debug artifacts (graph code, graph breaks, recompiles,
guards, bytecode, generated kernels) on a logger named ``dynajit.<artifact>``.
Artifacts are silent until switched on by ``DYNAJIT_LOGS=graph_breaks,recompiles``
(read when this module is imported) or by :func:`set_logs`; switching one on
sets its logger to INFO and makes sure a stderr handler is attached once. An
artifact is off at WARNING, not at the logger's default level, which would take
the root logger's: a program logging at INFO would print every kernel.
"""

from __future__ import annotations

import difflib
import logging
import os
import sys

__all__ = ["ARTIFACTS", "artifact_enabled", "artifact_logger", "set_logs"]

ARTIFACTS: dict[str, str] = {
    "graph_code": "the Python code of every captured FX graph",
    "graph_breaks": "every graph break, with its reason and the user's line",
    "recompiles": "every recompilation, with the guard that failed",
    "guards": "the guards of every compiled entry, one per line",
    "bytecode": "the original and the modified bytecode of every converted frame",
    "output_code": "the kernels and wrapper code a backend generated",
}

_ROOT = "dynajit"
_handler: logging.Handler | None = None


def artifact_logger(artifact: str) -> logging.Logger:
    """Return the logger for ``artifact`` (one of :data:`ARTIFACTS`)."""
    if artifact not in ARTIFACTS:
        raise ValueError(_unknown_message(artifact))
    return logging.getLogger(f"{_ROOT}.{artifact}")


def artifact_enabled(artifact: str) -> bool:
    """True when messages on ``artifact`` are emitted (cheap: check before formatting)."""
    return artifact_logger(artifact).isEnabledFor(logging.INFO)


def set_logs(*artifacts: str, **switches: bool) -> None:
    """Switch log artifacts on or off.

    ``set_logs("graph_breaks", "recompiles")`` switches those on;
    ``set_logs(guards=False)`` switches one off; ``set_logs()`` switches
    every artifact off. Unknown names raise ``ValueError`` listing the known
    artifacts.
    """
    wanted = {name: True for name in artifacts} | switches or dict.fromkeys(ARTIFACTS, False)
    for name in wanted:
        if name not in ARTIFACTS:
            raise ValueError(_unknown_message(name))
    for name, on in wanted.items():
        logger = artifact_logger(name)
        logger.setLevel(logging.INFO if on else logging.WARNING)
    if any(wanted.values()):
        _ensure_handler()


def _ensure_handler() -> None:
    global _handler
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        logging.getLogger(_ROOT).addHandler(_handler)


def _unknown_message(name: str) -> str:
    close = difflib.get_close_matches(name, ARTIFACTS, n=2)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    return f"unknown log artifact {name!r}{hint}; known artifacts: {', '.join(ARTIFACTS)}"


def _apply_environment() -> None:
    for logger in map(artifact_logger, ARTIFACTS):  # (one the program set a level on before importing keeps it)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
    raw = os.environ.get("DYNAJIT_LOGS", "")
    names = [part.strip() for part in raw.split(",") if part.strip()]
    if names:
        set_logs(*names)


_apply_environment()
