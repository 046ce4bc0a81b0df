"""The implementations compared: eager (twice, for the noise floor), torch.compile, and dynajit per backend.

Each one wraps a workload's target, clears its in-memory compile caches on
``reset`` (so the next wrap compiles again, from the on-disk caches: the
"warm" compile), and reports how many graphs, ops and graph breaks its last
compilation produced. dynajit is measured through a counting backend and the
``dynajit.graph_breaks`` logger only, so the figures need nothing beyond the
backend contract and the log artifacts.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "Counts",
    "CountingBackend",
    "DynajitImpl",
    "EagerImpl",
    "Implementation",
    "LogCollector",
    "TorchCompileImpl",
    "dynajit_reset",
]

GRAPH_OPS = ("call_function", "call_method", "call_module")


@dataclass
class Counts:
    """What one compilation produced; None where the implementation cannot tell."""

    graphs: int | None = None
    ops: int | None = None
    breaks: int | None = None
    break_reasons: list[str] = field(default_factory=list)
    recompiles: int | None = None


class Implementation:
    """Eager: the target itself. Subclasses compile it."""

    compiles = False

    def __init__(self, name: str) -> None:
        self.name = name

    def wrap(self, target: Callable[..., Any]) -> Callable[..., Any]:
        return target

    def reset(self) -> None:
        """Forget every compiled entry held in memory (on-disk caches stay)."""

    def start_cold(self, folder: str) -> None:
        """Make the next compile as cold as a new process's: compile caches empty, on disk in ``folder`` and in
        memory. What a machine builds once for every model (dynajit's uniform-math library) is kept."""

    def counts(self) -> Counts:
        return Counts()


class EagerImpl(Implementation):
    pass


class TorchCompileImpl(Implementation):
    """``torch.compile`` with its default inductor backend, counted through ``torch._dynamo.utils.counters``."""

    compiles = True

    def __init__(self, name: str = "torch.compile") -> None:
        super().__init__(name)

    def wrap(self, target: Callable[..., Any]) -> Callable[..., Any]:
        return torch.compile(target)

    def reset(self) -> None:
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()

    def start_cold(self, folder: str) -> None:
        import torch._inductor.utils

        # As torch's own fresh_cache(): both directories are read from the environment at each use.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "torchinductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
        torch._inductor.utils.clear_caches()

    def counts(self) -> Counts:
        from torch._dynamo.utils import counters

        breaks = counters["graph_break"]
        return Counts(
            graphs=counters["stats"]["unique_graphs"],
            ops=counters["stats"]["calls_captured"],
            breaks=sum(breaks.values()),
            break_reasons=[_first_line(reason) for reason in breaks],
            recompiles=counters["recompiles"].total() if "recompiles" in counters else None,
        )


class CountingBackend:
    """A dynajit backend that counts the graphs and ops it is handed, then calls the real backend."""

    def __init__(self, backend: Callable[..., Any]) -> None:
        self.backend = backend
        self.graphs = 0
        self.ops = 0
        self.__name__ = f"counting_{getattr(backend, '__name__', 'backend')}"

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Callable[..., Any]:
        self.graphs += 1
        self.ops += sum(node.op in GRAPH_OPS for node in gm.graph.nodes)
        return self.backend(gm, example_inputs)


class LogCollector(logging.Handler):
    """Keeps the messages of dynajit's ``graph_breaks`` and ``recompiles`` log artifacts, and prints none."""

    ARTIFACTS = ("graph_breaks", "recompiles")

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: dict[str, list[str]] = {name: [] for name in self.ARTIFACTS}

    def install(self) -> None:
        try:
            from dynajit.fxgraph import set_logs

            set_logs(*self.ARTIFACTS)
        except Exception:
            pass  # the loggers are plain ``logging`` loggers: switching them on below is enough
        for name in self.ARTIFACTS:
            logger = logging.getLogger(f"dynajit.{name}")
            logger.setLevel(logging.INFO)
            logger.propagate = False  # collected here, not echoed on stderr
            if self not in logger.handlers:
                logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        artifact = record.name.rsplit(".", 1)[-1]
        if artifact in self.messages:
            try:
                self.messages[artifact].append(record.getMessage())
            except Exception:
                self.messages[artifact].append(str(record.msg))

    def clear(self) -> None:
        for messages in self.messages.values():
            messages.clear()


def dynajit_reset() -> bool:
    """Clear dynajit's compiled-code caches through the first public ``reset`` there is; False if none yet."""
    for module_name in ("dynajit.compiler", "dynajit._dynamo", "dynajit.capture"):
        try:
            reset = getattr(importlib.import_module(module_name), "reset", None)
            if callable(reset):
                reset()
                return True
        except Exception:
            continue  # declared but not wired to the layer below yet: try the next one
    return False


class DynajitImpl(Implementation):
    """``dynajit.compiler.compile`` with one backend, wrapped in a fresh :class:`CountingBackend` per wrap.

    A fresh backend object per wrap also means a fresh per-backend cache, so a
    second wrap recompiles even before dynajit has a ``reset``.
    """

    compiles = True

    def __init__(self, backend_name: str, logs: LogCollector) -> None:
        super().__init__(f"dynajit[{backend_name}]")
        self.backend_name = backend_name
        self.logs = logs
        self.counter: CountingBackend | None = None

    def wrap(self, target: Callable[..., Any]) -> Callable[..., Any]:
        import dynajit.compiler
        from dynajit.compiler._registry import lookup_backend

        # Strict: a frame that falls back to eager raises (the table shows why) instead of being timed as compiled.
        dynajit.compiler.config.strict = True
        self.counter = CountingBackend(lookup_backend(self.backend_name))
        return dynajit.compiler.compile(target, backend=self.counter)

    def reset(self) -> None:
        dynajit_reset()
        self.logs.clear()
        self.counter = None

    def start_cold(self, folder: str) -> None:
        from dynajit.inductor_lite import config, forget_loaded_libraries
        from harness.environment import point_dynajit_cache_at

        runtime = os.path.join(config.cache_dir, "runtime") if config.cache_dir else ""
        point_dynajit_cache_at(folder)
        if runtime and os.path.isdir(runtime):  # built once per machine, as the start-up probe built it
            shutil.copytree(runtime, os.path.join(config.cache_dir, "runtime"), dirs_exist_ok=True)
        forget_loaded_libraries()

    def counts(self) -> Counts:
        breaks = self.logs.messages["graph_breaks"]
        return Counts(
            graphs=self.counter.graphs if self.counter else None,
            ops=self.counter.ops if self.counter else None,
            breaks=len(breaks),
            break_reasons=[_first_line(message) for message in dict.fromkeys(breaks)],
            recompiles=len(self.logs.messages["recompiles"]),
        )


def _first_line(text: Any) -> str:
    lines = str(text).strip().splitlines()
    return lines[0] if lines else ""
