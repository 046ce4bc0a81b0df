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
