"""How far a run's figures can be trusted: the noise floor from the samples themselves, and a machine-load verdict.

The noise floor of a workload is the relative spread of the repeated,
interleaved samples of one implementation (eager, timed twice as ``eager`` and
``eager (again)``, pooled): ``(p90 - p10) / median``. It is computed from the
very samples whose medians the report prints, so a run whose eager samples
range from 24 ms to 172 ms cannot claim a floor near zero. A floor above
:data:`NOISY_FLOOR` marks the workload's figures unreliable; a load average
above :data:`BUSY_LOAD_PER_CORE` runnable processes per usable core, at the
start or the end of the run, marks the whole run as measured under load.

Everything here is a pure function over numbers, so it is tested without timing anything.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BUSY_LOAD_PER_CORE",
    "NOISY_FLOOR",
    "Verdict",
    "machine_verdict",
    "noise_floor",
    "relative_spread",
    "within_noise",
    "workload_verdict",
]

# Above this relative spread (p90-p10 over the median) of eager's samples, a workload's figures are unreliable.
NOISY_FLOOR = 0.10
# More runnable processes per usable core than this (1-minute load average) and the machine is too busy.
BUSY_LOAD_PER_CORE = 1.5
# Fewer samples than this and no spread can be estimated.
MIN_SAMPLES = 3


def relative_spread(samples: Sequence[float]) -> float:
    """``(p90 - p10) / median`` of ``samples``; ``inf`` with fewer than :data:`MIN_SAMPLES` or a median of 0.

    Deciles are interpolated between order statistics (``statistics.quantiles``,
    inclusive method), so a single outlier among a few samples widens the spread
    in proportion instead of being ignored or taken whole.
    """
    values = [value for value in samples if math.isfinite(value)]
    if len(values) < MIN_SAMPLES:
        return math.inf
    median = statistics.median(values)
    if median <= 0:
        return math.inf
    deciles = statistics.quantiles(values, n=10, method="inclusive")
    return (deciles[-1] - deciles[0]) / median


def noise_floor(*sample_lists: Sequence[float]) -> float:
    """The relative spread of the pooled samples of repeated measurements of one implementation."""
    return relative_spread([value for samples in sample_lists for value in samples])


def within_noise(speedup: float, floor: float) -> bool:
    """True when ``speedup`` is no further from 1 than the noise floor (either way, on a log scale)."""
    if not math.isfinite(floor):
        return True
    return 1 / (1 + floor) <= speedup <= 1 + floor


@dataclass(frozen=True)
class Verdict:
    """Whether figures can be trusted, and why not."""

    reliable: bool
    reasons: tuple[str, ...] = ()

    def describe(self) -> str:
        return "reliable" if self.reliable else "UNRELIABLE: " + "; ".join(self.reasons)


def workload_verdict(floor: float, threshold: float = NOISY_FLOOR) -> Verdict:
    """Unreliable when the noise floor is above ``threshold`` (or unknown)."""
    if not math.isfinite(floor):
        return Verdict(False, ("too few samples to estimate the noise floor",))
    if floor > threshold:
        return Verdict(False, (f"noise floor {floor:.0%} is above {threshold:.0%}",))
    return Verdict(True)


def machine_verdict(
    load_averages: Sequence[Sequence[float]], cores: int, threshold: float = BUSY_LOAD_PER_CORE
) -> Verdict:
    """Unreliable when any 1-minute load average given is above ``threshold`` per usable core."""
    cores = max(1, cores)
    worst = max((values[0] for values in load_averages if values), default=0.0)
    if worst > threshold * cores:
        return Verdict(
            False,
            (f"load average {worst:.1f} on {cores} cores (above {threshold:g} per core): measured under load",),
        )
    return Verdict(True)
