"""torch's process state read or set inside a compiled function: thread counts, anomaly mode, seeds, warn-always.

Each case runs the function eagerly and compiled after the same state change and compares the values. A read
is a constant the entry's guards keep true (changing the state recompiles); a write is a graph break, so Python
makes it on every call, as eager does (``tests/integration/test_process_state_compiled.py`` checks the state
each leaves behind, through a backend that keeps no such call).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter
from dynajit.guards import process_state as process_state_guard


@pytest.fixture(autouse=True)
def _restored(process_state: Any) -> Iterator[None]:
    capture.reset()
    yield
    capture.reset()


# name: (what the function reads, two ways to set it)
READS: dict[str, tuple[Callable[[], Any], Callable[[], None], Callable[[], None]]] = {
    "thread count": (torch.get_num_threads, lambda: torch.set_num_threads(2), lambda: torch.set_num_threads(1)),
    "anomaly mode": (
        torch.is_anomaly_enabled,
        lambda: torch.set_anomaly_enabled(False),
        lambda: torch.set_anomaly_enabled(True),
    ),
    "warn always": (
        torch.is_warn_always_enabled,
        lambda: torch.set_warn_always(False),
        lambda: torch.set_warn_always(True),
    ),
    "initial seed": (lambda: torch.initial_seed() % 1000, lambda: torch.manual_seed(1), lambda: torch.manual_seed(2)),
    "matmul precision": (
        lambda: len(torch.get_float32_matmul_precision()),
        lambda: torch.set_float32_matmul_precision("highest"),
        lambda: torch.set_float32_matmul_precision("high"),
    ),
    "deterministic algorithms": (
        torch.are_deterministic_algorithms_enabled,
        lambda: torch.use_deterministic_algorithms(False),
        lambda: torch.use_deterministic_algorithms(True),
    ),
}


@pytest.mark.parametrize("name", READS)
def test_a_state_read_is_a_constant_the_guards_keep_true(name: str) -> None:
    read, set_one, set_other = READS[name]

    def fn(x):
        return x * float(read())

    counter = CompileCounter()
    # (the initial seed is read through a torch.Generator method, which is a graph break)
    compiled = capture.optimize(counter, fullgraph=name != "initial seed")(fn)
    x = torch.ones(3)
    for setting in (set_one, set_other, set_one):
        setting()
        torch.testing.assert_close(compiled(x), fn(x))
    if name != "initial seed":
        assert counter.frame_count == 2  # (the second setting recompiled; the first entry serves the third call)


def test_a_write_is_a_graph_break_that_names_the_function() -> None:
    def fn(x):
        torch.set_num_threads(torch.get_num_threads())
        return x + 1

    with capture.observe() as seen:
        torch.testing.assert_close(capture.optimize(CompileCounter())(fn)(torch.ones(2)), torch.ones(2) + 1)
    reasons = [brk.reason for frame in seen.frames for brk in frame.graph_breaks]
    assert any("torch.set_num_threads() reads or sets torch's process state" in r for r in reasons), reasons


def test_api_usage_logging_is_no_break() -> None:
    def fn(x):
        torch._C._log_api_usage_once("a library's usage")
        return x + 1

    counter = CompileCounter()
    torch.testing.assert_close(capture.optimize(counter, fullgraph=True)(fn)(torch.ones(2)), torch.ones(2) + 1)
    assert counter.frame_count == 1


def test_the_process_state_guard_names_the_read_when_it_fails() -> None:
    guard = process_state_guard(torch.get_num_threads)
    threads = torch.get_num_threads()
    (check,) = guard.checks
    assert "get_num_threads" in check.readable()
    torch.set_num_threads(threads + 1)
    assert f"expected {threads}, got {threads + 1}" in check.explain(())


def test_a_device_availability_read_is_no_graph_break() -> None:
    # (torch.cuda.is_available() reads torch._C._cuda_getDeviceCount(): a read by its camelCase name)
    def fn(x):
        return x * (2 if torch.cuda.is_available() else 3)

    counter = CompileCounter()
    torch.testing.assert_close(capture.optimize(counter, fullgraph=True)(fn)(torch.ones(2)), fn(torch.ones(2)))
    assert counter.frame_count == 1
