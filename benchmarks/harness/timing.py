"""Timing that holds up on a shared machine: interleaved samples, min/median/max, a hard time limit.

Implementations are sampled round by round in a shuffled order, so a burst of
load from another process hits all of them alike instead of one whole column.
A sample times a block of calls long enough for the clock (``calls_per_sample``,
the same for every implementation of a workload); the garbage collector is
off while sampling.
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
import resource
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Stats", "paired_ratio", "calls_per_sample", "interleaved", "peak_bytes", "time_limit", "timed_call"]


@dataclass
class Stats:
    """Seconds per call over the samples of one implementation, and its minor page faults per call."""

    min: float
    median: float
    max: float
    samples: int
    page_faults_per_call: float = 0.0
    # The samples in round order: sample i of every implementation was taken in the same round.
    per_round: list[float] = field(default_factory=list, repr=False)

    @classmethod
    def of(cls, per_call: list[float], faults: int = 0, calls: int = 1) -> Stats:
        return cls(
            min(per_call),
            statistics.median(per_call),
            max(per_call),
            len(per_call),
            faults / (calls * len(per_call)),
            list(per_call),
        )


def paired_ratio(baseline: Stats, other: Stats) -> tuple[float, float, float]:
    """Quartiles (25th, median, 75th) over rounds of baseline's sample over other's sample from the same round.

    Load that lasts a round slows both samples of that round alike, so it
    cancels in the ratio; the ratio of medians keeps it.
    """
    ratios = [base / value for base, value in zip(baseline.per_round, other.per_round) if value > 0]
    if len(ratios) < 2:
        return ratios[0], ratios[0], ratios[0]
    low, median, high = statistics.quantiles(ratios, n=4, method="inclusive")
    return low, median, high


def timed_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn`` once; return (wall seconds, its result)."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _sample(step: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        step()
    return (time.perf_counter() - start) / calls


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def calls_per_sample(step: Callable[[], Any], target_seconds: float) -> int:
    """How many calls of ``step`` make one sample of about ``target_seconds`` (at least one)."""
    step()
    per_call = min(_sample(step, 1) for _ in range(3))
    return max(1, math.ceil(target_seconds / max(per_call, 1e-9)))


def interleaved(
    steps: dict[str, Callable[[], Any]],
    calls: int,
    *,
    budget_seconds: float,
    min_rounds: int,
    max_rounds: int,
    seed: int = 0,
    describe: Callable[[BaseException], str] | None = None,
) -> tuple[dict[str, Stats], dict[str, str]]:
    """Sample every step round by round, each round in a new random order.

    One warm-up round is discarded and sizes the run: as many rounds as fit in
    ``budget_seconds``, within [``min_rounds``, ``max_rounds``], but no more than
    fit in three budgets (and at least 5). A step that
    raises is dropped and its error returned (as ``describe`` words it); the others go on.
    """
    rng = random.Random(seed)
    errors: dict[str, str] = {}
    live = dict(steps)
    samples: dict[str, list[float]] = {name: [] for name in steps}
    faults: dict[str, int] = dict.fromkeys(steps, 0)

    def one_round() -> float:
        names = list(live)
        rng.shuffle(names)
        spent = 0.0
        for name in names:
            faults_before = _minor_faults()
            try:
                per_call = _sample(live[name], calls)
            except Exception as exc:
                errors[name] = (
                    describe(exc) if describe else f"failed while timing: {type(exc).__name__}: {_first_line(exc)}"
                )
                del live[name]
                continue
            faults[name] += _minor_faults() - faults_before
            samples[name].append(per_call)
            spent += per_call * calls
        return spent

    gc_was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        round_seconds = one_round()
        for values in samples.values():
            values.clear()
        faults.update(dict.fromkeys(faults, 0))
        rounds = int(budget_seconds / max(round_seconds, 1e-9))
        rounds = max(min_rounds, min(max_rounds, rounds))
        # On a crowded machine min_rounds alone could run long: never more than three budgets, nor under 5 rounds.
        rounds = min(rounds, max(5, int(3 * budget_seconds / max(round_seconds, 1e-9))))
        for _ in range(rounds):
            if not live:
                break
            one_round()
    finally:
        if gc_was_enabled:
            gc.enable()
    stats = {name: Stats.of(values, faults[name], calls) for name, values in samples.items() if values and name in live}
    return stats, errors


def peak_bytes(step: Callable[[], Any]) -> int:
    """The most bytes the CPU allocator held above its level at the start, during one ``step``, in steady state.

    Read from the profiler's allocation events, so it counts every tensor torch
    allocates (eager ops and compiled kernels' buffers alike) and nothing else.
    The first call under the profiler allocates more than later ones (eager's too, and
    by as much for every implementation), so one profiled call is made and not counted;
    of the next three, the least is taken: a one-time allocation elsewhere in the process
    (a cache torch fills on first use) lands in one call, not in every one.
    """
    _profiled_peak(step)
    return min(_profiled_peak(step) for _ in range(3))


def _profiled_peak(step: Callable[[], Any]) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted(
        (event.start_ns(), event.nbytes())
        for event in prof.profiler.kineto_results.events()
        if event.name() == "[memory]" and str(event.device_type()).endswith("CPU")
    )
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise ``TimeoutError`` in the block after ``seconds`` (main thread on POSIX; elsewhere no limit).

    The signal lands between Python bytecodes, so a compiler stuck in Python is
    stopped; one stuck in C code is stopped when it returns to Python.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable or seconds <= 0:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise TimeoutError(f"{what} took more than {seconds:.0f}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""
