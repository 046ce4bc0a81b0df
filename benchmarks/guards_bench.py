"""Guard evaluation cost and whole per-call overhead, dynajit beside torch.compile in one process.

Measures, in microseconds (median over repeats of timeit blocks):

- dynajit guard checks for a one-tensor and a ten-tensor function (the guards
  capture records: TENSOR_MATCH per input, GLOBAL_STATE, BACKEND_MATCH, and
  aliasing between the ten inputs), with each part on its own;
- the per-call overhead of a compiled ``x + 1`` on an 8-element tensor minus
  eager, for ``torch.compile`` and for dynajit (when dynajit can compile it;
  otherwise "not available yet" and why), each also with a backend that runs
  the captured graph as it is, so the framework's own cost shows. These are
  sampled interleaved with eager, and the overhead is the median of the
  per-round differences.

Run ``python benchmarks/guards_bench.py``; ``main()`` prints a Markdown table and
returns the figures as a dict.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import timeit
from collections.abc import Callable
from typing import Any

import torch

from dynajit.guards import (
    GuardSet,
    LocalSource,
    ParamSource,
    SubmoduleSource,
    _program,
    backend_match,
    global_state,
    id_match,
    layout_match,
    tensor_aliasing,
    tensor_match,
)
from dynajit.guards._native import machine_module, tensor_facts_module

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
    figures.update(layout_figures())
    return figures


def layout_figures(count: int = 40) -> dict[str, tuple[float, float]]:
    """Microseconds per check of a module's parameters' guards (identity and LAYOUT_MATCH, as capture records
    them for a module it reads), with the tensor facts reader answering the layout checks and without it."""
    model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(count // 2)])
    guards = GuardSet()
    for name, param in model.named_parameters():
        layer, member = name.split(".")
        source = ParamSource(SubmoduleSource(LocalSource("m"), layer), member)
        guards.add(id_match(source, param))
        guards.add(layout_match(source, param))
    with_reader = guards.compile(("m",), {}).check
    original = _program.tensor_facts_module
    _program.tensor_facts_module = lambda: None  # type: ignore[assignment]
    try:
        without = guards.compile(("m",), {}).check
    finally:
        _program.tensor_facts_module = original
    label = f"guards of {count} module parameters (identity, layout)"
    return {
        label: timed_us(lambda: with_reader(model)),
        "  the same, without the tensor facts reader": timed_us(lambda: without(model)),
    }


def add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def _dynajit(backend: str | None) -> Callable[..., Any]:
    """dynajit's compiled ``add_one``: through the public API (default backend), or capture alone with a
    backend that runs the captured graph as it is (``backend=None``)."""
    if backend is None:
        import dynajit.capture

        return dynajit.capture.optimize(_backend)(add_one)
    import dynajit.compiler

    return dynajit.compiler.compile(add_one, backend=backend)


# label -> (makes the compiled function, whether a failure means "not available yet" rather than an error)
IMPLEMENTATIONS: dict[str, tuple[Callable[[], Callable[..., Any]], bool]] = {
    "torch.compile overhead": (lambda: torch.compile(add_one), False),
    "dynajit overhead": (lambda: _dynajit("inductor"), True),
    "torch.compile(backend='eager') overhead": (lambda: torch.compile(add_one, backend="eager"), False),
    "dynajit capture alone (graph run as is) overhead": (lambda: _dynajit(None), True),
}


def _interleaved_us(fns: dict[str, Callable[[], Any]], rounds: int = REPEATS) -> dict[str, list[float]]:
    """Microseconds per call of each function, sampled round by round in a shuffled order.

    Load from other processes then hits every function of a round alike, so
    per-round differences (compiled minus eager) stay meaningful.
    """
    calls = {
        label: max(1, int(SAMPLE_SECONDS / max(timeit.timeit(fn, number=100) / 100, 1e-9))) for label, fn in fns.items()
    }
    samples: dict[str, list[float]] = {label: [] for label in fns}
    order = list(fns)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(rounds):
            random.shuffle(order)
            for label in order:
                samples[label].append(timeit.timeit(fns[label], number=calls[label]) / calls[label] * 1e6)
    finally:
        if was_enabled:
            gc.enable()
    return samples


def overhead_figures() -> tuple[dict[str, tuple[float, float]], dict[str, str]]:
    """Per-call microseconds minus eager for torch.compile and dynajit on ``x + 1`` over 8 elements.

    Reported as the median over rounds of (compiled - eager) within the round, and min(compiled) - min(eager).
    """
    x = torch.randn(8)
    fns: dict[str, Callable[[], Any]] = {"eager x + 1 (absolute)": lambda: add_one(x)}
    notes = {}
    for label, (make, ours) in IMPLEMENTATIONS.items():
        try:
            compiled = make()
            torch.testing.assert_close(compiled(x), add_one(x))
            fns[label] = lambda compiled=compiled: compiled(x)
        except Exception as error:
            prefix = "not available yet" if ours else "failed"
            first_line = str(error).splitlines()[0] if str(error) else ""
            notes[label] = f"{prefix}: {type(error).__name__}: {first_line}"
    samples = _interleaved_us(fns)
    eager = samples.pop("eager x + 1 (absolute)")
    figures = {"eager x + 1 (absolute)": (statistics.median(eager), min(eager))}
    for label, times in samples.items():
        figures[label] = (statistics.median(t - e for t, e in zip(times, eager)), min(times) - min(eager))
    return figures, notes


def main() -> dict[str, Any]:
    """Print a Markdown table of the figures and return them (microseconds)."""
    torch.set_num_threads(1)
    machine_module(wait=True), tensor_facts_module(wait=True)  # (a first run builds them: not what is measured)
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
    ours = figures.get("dynajit overhead")
    reference = figures.get("torch.compile overhead")
    if ours is not None and reference is not None and reference[0] > 0 and reference[1] > 0:
        ratios = (ours[0] / reference[0], ours[1] / reference[1])
        verdict = "meets" if ratios[0] <= 0.5 else "misses"
        print(
            f"\ndynajit per-call overhead is {ratios[0]:.2f}x torch.compile's by median, {ratios[1]:.2f}x by min"
            f" ({verdict} the target: at most 0.5x)"
        )
        result["overhead_ratio"] = {"median": ratios[0], "min": ratios[1]}
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
