"""Shared pytest settings. Imports no dynajit package but guards, if installed, so each package's tests run with
that package alone."""

import os

import pytest
import torch

torch.manual_seed(0)
os.environ.setdefault("TRITON_INTERPRET", "1")
# Every test runs strict: a frame that would silently fall back to eager (a failed conversion or backend
# compile, the cache size limit) raises instead. Tests of the fallback itself patch strict=False, saying why.
# Set before any dynajit package is imported, since capture's config reads the environment when created.
os.environ["DYNAJIT_STRICT"] = "1"


def pytest_sessionstart(session):
    """Wait for the guard machine (built once per interpreter, or loaded from its cache), so every test's guards
    run on it, as a process's guards do once it is ready."""
    try:
        from dynajit.guards._native import machine_module
    except ImportError:
        return
    machine_module(wait=True)


# torch's process state a test may change (``process_state`` restores it): thread count, anomaly mode,
# warn-always, float32 matmul precision, deterministic algorithms, default dtype.
_PROCESS_STATE = (
    (torch.get_num_threads, torch.set_num_threads),
    (torch.is_anomaly_enabled, torch.set_anomaly_enabled),
    (torch.is_warn_always_enabled, torch.set_warn_always),
    (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    (torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms),
    (torch.get_default_dtype, torch.set_default_dtype),
)


class ProcessState:
    """``read()`` the state as a tuple; ``restore(state)`` sets it back to one read before."""

    @staticmethod
    def read():
        return tuple(get() for get, _ in _PROCESS_STATE)

    @staticmethod
    def restore(state):
        for (_, set_), value in zip(_PROCESS_STATE, state, strict=True):
            set_(value)


@pytest.fixture
def process_state():
    """The ProcessState helper; the state the test found is restored after it, and so is the global seed."""
    before, seed = ProcessState.read(), torch.initial_seed()
    yield ProcessState
    ProcessState.restore(before)
    torch.manual_seed(seed)


# Module-level hooks a test may replace (a generated program's forced layout timings) and must put back: one
# left replaced decided the next tests' compiles in that worker, far from the test that left it.
_REPLACEABLE = {"dynajit.inductor_lite._layout": ("_conv_seconds", "_seconds", "_peak_bytes")}


def _replaceable_state():
    import sys

    return {
        (module, name): getattr(sys.modules[module], name, None)
        for module, names in _REPLACEABLE.items()
        if module in sys.modules
        for name in names
    }


def _logs_on():
    """The dynajit loggers that emit INFO messages (a log artifact switched on)."""
    import logging

    return {
        name
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith("dynajit") and isinstance(logger, logging.Logger) and logger.isEnabledFor(logging.INFO)
    }


@pytest.fixture(autouse=True)
def _leaves_no_state_behind(request):
    """A test leaves dynajit's replaceable hooks as it found them, and switches off the log artifacts it switched
    on (one left on printed every later compile's kernels)."""
    hooks, logs = _replaceable_state(), _logs_on()
    yield
    left = [
        f"{module}.{name}"
        for (module, name), value in _replaceable_state().items()
        if hooks.get((module, name), value) is not value
    ]
    left += [f"logger {name!r} switched on" for name in sorted(_logs_on() - logs)]
    if left:
        pytest.fail(f"{request.node.nodeid} left behind: {', '.join(left)}", pytrace=False)
