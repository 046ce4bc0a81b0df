"""One code object (or equal ones) running under different globals: each globals dict gets the entry's names."""

from __future__ import annotations

import types

import torch

from dynajit.capture import optimize, reset
from dynajit.capture.testing import CompileCounter

SOURCE = """
import torch

def scaled(x):
    return torch.sin(x) * SCALE + 1
"""


def _define(scale: float) -> types.FunctionType:
    namespace: dict = {"SCALE": scale}
    exec(compile(SOURCE, "<shared source>", "exec"), namespace)
    return namespace["scaled"]


def test_the_same_source_exec_twice_runs_in_each_namespace() -> None:
    reset()
    counter = CompileCounter()
    x = torch.randn(5)
    # equal globals: the guards pass, so the second function reuses the first one's entry
    first, second = _define(2.0), _define(2.0)
    assert first.__code__ == second.__code__ and first.__code__ is not second.__code__
    for fn in (first, second, first, second, _define(3.0)):
        torch.testing.assert_close(optimize(counter)(fn)(x), fn(x))
    assert counter.frame_count == 2, "equal code under equal globals shares an entry; a new SCALE recompiles"


def test_one_code_object_under_two_globals() -> None:
    reset()
    counter = CompileCounter()
    x = torch.randn(5)
    original = _define(2.0)
    elsewhere = types.FunctionType(original.__code__, {"SCALE": 2.0, "torch": torch}, "scaled")
    torch.testing.assert_close(optimize(counter)(original)(x), original(x))
    torch.testing.assert_close(optimize(counter)(elsewhere)(x), elsewhere(x))
    torch.testing.assert_close(optimize(counter)(original)(x), original(x))
    assert counter.frame_count == 1


def test_a_discarded_entry_leaves_the_helpers_other_entries_installed_in_the_same_globals():
    """Every entry with a graph break installs the same call helper under one name: discarding one entry (an
    object its guards watched died) must leave it for the entries still running from those globals."""
    from dynajit.capture._cache import CacheEntry

    helper = object()
    first = CacheEntry(None, "compiled", (lambda: None).__code__, new_globals={"__helper": helper, "__fn_1": 1})
    second = CacheEntry(None, "compiled", (lambda: None).__code__, new_globals={"__helper": helper, "__fn_2": 2})
    f_globals: dict = {}
    first.install_globals(f_globals)
    second.install_globals(f_globals)
    first.uninstall_globals()
    assert f_globals == {"__helper": helper, "__fn_2": 2}
    second.uninstall_globals()
    assert f_globals == {}
