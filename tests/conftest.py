"""Shared pytest settings. Imports no dynajit package but guards, if installed, so each package's tests run with
that package alone."""

import os

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
