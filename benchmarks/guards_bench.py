"""Guard evaluation cost and whole per-call overhead, dynajit beside torch.compile in one process.

Measures, in microseconds (median over repeats of timeit blocks):

- dynajit guard checks for a one-tensor and a ten-tensor function (the guards
  capture records: TENSOR_MATCH per input, GLOBAL_STATE, BACKEND_MATCH, and
  aliasing between the ten inputs), with each part on its own;
- the per-call overhead of a compiled ``x + 1`` on an 8-element tensor minus
  eager, for ``torch.compile`` and for dynajit (when dynajit can compile it;
  otherwise "not available yet" and why).

Run ``python benchmarks/guards_bench.py``; ``main()`` prints a Markdown table and
returns the figures as a dict.
"""

from __future__ import annotations

import gc
import statistics
import sys
import timeit
from collections.abc import Callable
from typing import Any

import torch

from dynajit.guards import GuardSet, LocalSource, backend_match, global_state, tensor_aliasing, tensor_match

REPEATS = 201
SAMPLE_SECONDS = 0.001


def timed_us(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, float]:
    """(median, min) microseconds per call of ``fn`` over ``repeats`` samples of about a millisecond (GC off).

    Short samples keep most of them clear of preemption on a shared machine;
    the median is the figure reported, the min the cost without interference.
    """
    fn()
    calls = max(1, int(SAMPLE_SECONDS / max(timeit.timeit(fn, number=100) / 100, 1e-9)))
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        samples = timeit.repeat(fn, number=calls, repeat=repeats)
    finally:
        if was_enabled:
            gc.enable()
    return statistics.median(samples) / calls * 1e6, min(samples) / calls * 1e6


def _current_backend() -> Any:
    return _backend


def _backend(gm: Any, example_inputs: Any) -> Any:
    return gm.forward


def guard_set_for(count: int) -> tuple[GuardSet, tuple[str, ...], list[torch.Tensor]]:
    """The guards capture records for a function of ``count`` tensor arguments."""
    names = tuple(f"x{i}" for i in range(count))
    tensors = [torch.randn(8) for _ in names]
    sources = [LocalSource(name) for name in names]
    guards = GuardSet(tensor_match(source, tensor) for source, tensor in zip(sources, tensors))
    guards.add(global_state())
    guards.add(backend_match(_current_backend, _backend))
    if count > 1:
        guards.add(tensor_aliasing([], sources))
    return guards, names, tensors


def guard_figures() -> dict[str, tuple[float, float]]:
    """Microseconds per guard check: whole sets for 1 and 10 tensors, and parts of the 1-tensor set."""
    figures = {}
    for count in (1, 10):
        guards, names, tensors = guard_set_for(count)
        check = guards.compile(names, globals()).check
        if not check(*tensors):
            raise AssertionError(guards.compile(names, globals()).failure_reason(*tensors))
        figures[f"guards, {count} tensor{'s' if count > 1 else ''}"] = timed_us(
            lambda check=check, tensors=tensors: check(*tensors), 20000
        )
    x = torch.randn(8)
    for label, guard in [
        ("  TENSOR_MATCH alone", tensor_match(LocalSource("x"), x)),
        ("  GLOBAL_STATE alone", global_state()),
        ("  BACKEND_MATCH alone", backend_match(_current_backend, _backend)),
    ]:
        check = GuardSet([guard]).compile(("x",), globals()).check
        figures[label] = timed_us(lambda check=check: check(x))
    empty = GuardSet().compile(("x",), {}).check
    figures["  empty check (call cost)"] = timed_us(lambda: empty(x))
    return figures


def add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def _overhead(
    compiled: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, eager: tuple[float, float]
) -> tuple[float, float]:
    torch.testing.assert_close(compiled(x), add_one(x))
    median, fastest = timed_us(lambda: compiled(x))
    return median - eager[0], fastest - eager[1]


def _dynajit_compiled() -> tuple[str, Callable[..., Any]]:
    """dynajit's compiled ``add_one`` through the public API, else through capture with a plain backend."""
    errors = []
    try:
        import dynajit.compiler

        fn = dynajit.compiler.compile(add_one)
        fn(torch.randn(8))
        return "dynajit (inductor)", fn
    except Exception as error:
        errors.append(f"dynajit.compiler: {type(error).__name__}: {error}")
    try:
        import dynajit.capture

        fn = dynajit.capture.optimize(_backend)(add_one)
        fn(torch.randn(8))
        return "dynajit (capture, graph run as is)", fn
    except Exception as error:
        errors.append(f"dynajit.capture: {type(error).__name__}: {error}")
    raise RuntimeError("; ".join(errors))


def overhead_figures() -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """Per-call microseconds minus eager for torch.compile and dynajit on ``x + 1`` over 8 elements."""
    x = torch.randn(8)
    eager_us = timed_us(lambda: add_one(x))
    figures, notes = {"eager x + 1 (absolute)": eager_us}, {}
    try:
        figures["torch.compile overhead"] = _overhead(torch.compile(add_one), x, eager_us)
    except Exception as error:
        notes["torch.compile overhead"] = f"failed: {type(error).__name__}: {error}"
    try:
        label, fn = _dynajit_compiled()
        figures[f"{label} overhead"] = _overhead(fn, x, eager_us)
    except Exception as error:
        notes["dynajit overhead"] = f"not available yet: {error}"
    return figures, notes


def main() -> dict[str, Any]:
    """Print a Markdown table of the figures and return them (microseconds)."""
    torch.set_num_threads(1)
    figures = guard_figures()
    overheads, notes = overhead_figures()
    figures.update(overheads)
    print("| measurement | us per call (median) | us per call (min) |")
    print("|---|---|---|")
    for label, (median, fastest) in figures.items():
        print(f"| {label} | {median:.2f} | {fastest:.2f} |")
    for label, note in notes.items():
        print(f"| {label} | {note} | |")
    result: dict[str, Any] = {
        "us_median": {label: value[0] for label, value in figures.items()},
        "us_min": {label: value[1] for label, value in figures.items()},
        "notes": notes,
    }
    ours = next((value for label, value in figures.items() if label.startswith("dynajit")), None)
    reference = figures.get("torch.compile overhead")
    if ours is not None and reference is not None and reference[0] > 0:
        ratio = ours[0] / reference[0]
        verdict = "meets" if ratio <= 0.5 else "misses"
        print(
            f"\ndynajit per-call overhead (median) is {ratio:.2f}x torch.compile's ({verdict} the target: at most 0.5x)"
        )
        result["overhead_ratio"] = ratio
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
