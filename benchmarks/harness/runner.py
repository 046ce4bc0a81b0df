"""Runs the suite: for each workload, compile and check every implementation, then time them interleaved.

Nothing a compiler does can stop the run: an exception (or a compile past the
time limit) becomes "failed: <first line>" in that workload's cell and the run
goes on, so the table shows whatever works today.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

from harness.environment import fresh_cache_folder
from harness.implementations import Implementation
from harness.noise import noise_floor, workload_verdict
from harness.timing import Stats, calls_per_sample, interleaved, paired_ratio, peak_bytes, time_limit, timed_call
from harness.workloads import Case, Workload

__all__ = [
    "EAGER",
    "EAGER_AGAIN",
    "FellBack",
    "Settings",
    "bench_workload",
    "compare",
    "describe_error",
    "fallback_in",
    "noise_figures",
    "startup_seconds",
]

EAGER = "eager"
EAGER_AGAIN = "eager (again)"


@dataclass
class Settings:
    """How long to spend: per-sample length, per-workload timing budget, round bounds, compile time limit.

    Real models (a workload with a ``group``) get their own, smaller budget and round bounds, and no warm
    compile: there are dozens of them and a full run has to stay near 20 minutes on two cores.
    """

    sample_seconds: float = 0.01
    budget_seconds: float = 12.0
    min_rounds: int = 20
    max_rounds: int = 200
    compile_limit_seconds: float = 240.0
    model_budget_seconds: float = 2.0
    model_min_rounds: int = 6
    model_max_rounds: int = 40
    # Where each workload's cold compiles get fresh, empty caches (None: caches shared with earlier workloads).
    cold_cache_root: str | None = None

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            sample_seconds=0.005,
            budget_seconds=1.2,
            min_rounds=5,
            max_rounds=40,
            compile_limit_seconds=90.0,
            model_budget_seconds=1.0,
            model_min_rounds=5,
            model_max_rounds=15,
        )

    def timing_for(self, workload: Workload) -> dict[str, float]:
        """The keyword arguments of :func:`interleaved` for ``workload``."""
        if workload.group:
            return {
                "budget_seconds": self.model_budget_seconds,
                "min_rounds": self.model_min_rounds,
                "max_rounds": self.model_max_rounds,
            }
        return {"budget_seconds": self.budget_seconds, "min_rounds": self.min_rounds, "max_rounds": self.max_rounds}


class FellBack(RuntimeError):
    """A compiler ran (part of) the workload eagerly instead of compiled code, and said so in a warning."""


def describe_error(exc: BaseException, stage: str = "") -> str:
    """``failed[ at <stage>]: <Type>: <first line>`` (the first line is what a table cell can hold).

    A dynajit ``StrictModeError`` (a frame that would have run eagerly) is described by its cause, the reason
    the frame could not be compiled: ``failed at <stage>: ran eagerly: <CauseType>: <first line>``.
    """
    where = f" at {stage}" if stage else ""
    cause = exc.__cause__
    if type(exc).__name__ == "StrictModeError" and cause is not None:
        lines = str(cause).strip().splitlines()
        return f"failed{where}: ran eagerly: {type(cause).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    lines = str(exc).strip().splitlines()
    return f"failed{where}: {type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def compare(actual: Any, expected: Any, case: Case) -> str:
    """ "ok", or "MISMATCH: <why>" when ``actual`` differs from eager's ``expected`` (values, dtypes, shapes)."""
    actual_leaves, _ = pytree.tree_flatten(actual)
    expected_leaves, _ = pytree.tree_flatten(expected)
    if len(actual_leaves) != len(expected_leaves):
        return f"MISMATCH: {len(actual_leaves)} outputs, eager has {len(expected_leaves)}"
    for index, (got, want) in enumerate(zip(actual_leaves, expected_leaves)):
        try:
            if isinstance(want, torch.Tensor) or isinstance(got, torch.Tensor):
                torch.testing.assert_close(got, want, rtol=case.rtol, atol=case.atol)
            elif got != want:
                return f"MISMATCH: output {index}: {got!r} != {want!r}"
        except AssertionError as exc:
            detail = " ".join(str(exc).split())
            return f"MISMATCH: output {index}: {detail[:160]}"
    return "ok"


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _is_ours(warning: warnings.WarningMessage) -> bool:
    """Warnings from the compilers under test (dynajit and inductor-lite name themselves in their messages), not
    torch's deprecations."""
    text = str(warning.message)
    return "dynajit" in text or "inductor-lite" in text or "dynajit" in warning.filename


def fallback_in(caught: list[warnings.WarningMessage]) -> FellBack | None:
    """A failure for the first warning of ours saying compiled code runs eagerly (a fallback strict mode cannot
    see, such as inductor-lite running a graph's aten ops after a failed kernel build), else None."""
    for warning in caught:
        text = str(warning.message)
        if _is_ours(warning) and issubclass(warning.category, RuntimeWarning) and "eagerly" in text:
            lines = [line for line in text.strip().splitlines() if line.strip()]
            return FellBack(" / ".join(lines[-1:] + lines[:1]) if len(lines) > 1 else text)
    return None


def _detach(value: Any) -> Any:
    return pytree.tree_map(lambda leaf: leaf.detach().clone() if isinstance(leaf, torch.Tensor) else leaf, value)


def startup_probe(x: torch.Tensor) -> torch.Tensor:
    """Compiled once per implementation before any workload, so one-off start-up costs stay out of them."""
    return torch.relu(x) * 2 + 1


def startup_seconds(impl: Implementation) -> float:
    """Seconds for ``impl`` to compile and run :func:`startup_probe` the first time (imports, worker pools)."""
    x = torch.randn(8)
    seconds, out = timed_call(lambda: impl.wrap(startup_probe)(x))
    torch.testing.assert_close(out, startup_probe(x))
    impl.reset()
    return seconds


def _compile_and_check(
    impl: Implementation,
    case: Case,
    reference: Any,
    limit: float,
    warm: bool = True,
    cold_cache_folder: str | None = None,
) -> tuple[dict, Callable | None]:
    """Cold compile (with empty caches in ``cold_cache_folder`` when given), correctness, counts, then (``warm``)
    warm compile from the caches the cold one filled; returns the record and the callable to time."""
    record: dict[str, Any] = {}
    stage = "cold compile"
    try:
        with time_limit(limit, f"{impl.name} {stage}"), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            impl.reset()
            if cold_cache_folder is not None:
                impl.start_cold(cold_cache_folder)
            cold_fn = impl.wrap(case.target)
            gc.collect()  # a full collection due from earlier work (another compile) does not fall in this one
            record["cold_compile_s"], out = timed_call(lambda: case.run(cold_fn))
        record["warnings"] = list(dict.fromkeys(_first_line(str(w.message)) for w in caught if _is_ours(w)))
        fell_back = fallback_in(caught)
        if fell_back is not None:
            raise fell_back
        record["correct"] = compare(out, reference, case)
        record.update(dataclasses.asdict(impl.counts()))
        if record["correct"] == "ok" and record.get("graphs") == 0:
            record["correct"] = "ok, but no graph: ran eagerly"
        if not warm:
            return record, cold_fn
        stage = "warm compile"
        with time_limit(limit, f"{impl.name} {stage}"):
            impl.reset()
            warm_fn = impl.wrap(case.target)
            gc.collect()
            record["warm_compile_s"], out = timed_call(lambda: case.run(warm_fn))
        if record["correct"].startswith("ok"):
            record["correct"] = compare(out, reference, case) if record["correct"] == "ok" else record["correct"]
        return record, warm_fn
    except Exception as exc:
        record["error"] = describe_error(exc, stage)
        return record, None


def bench_workload(
    workload: Workload, impls: list[Implementation], settings: Settings, log: Callable[[str], None]
) -> dict[str, Any]:
    """Measure one workload with every implementation; the result is JSON-ready."""
    result: dict[str, Any] = {
        "name": workload.name,
        "description": workload.description,
        "group": workload.group,
        "impls": {},
    }
    reason = workload.unavailable()
    if reason:
        result.update(status="skipped", skip_reason=reason)
        log(f"  skipped: {reason}")
        return result
    try:
        case = workload.build()
        reference = _detach(case.run(case.target))
    except Exception as exc:
        result.update(status="skipped", skip_reason=describe_error(exc, "building the workload"))
        return result
    result["status"] = "ok"
    records: dict[str, dict[str, Any]] = {EAGER: {"correct": "ok"}, EAGER_AGAIN: {"correct": "ok"}}
    callables: dict[str, Callable[..., Any]] = {EAGER: case.target, EAGER_AGAIN: case.target}
    for impl in impls:
        started = time.perf_counter()
        folder = None
        if settings.cold_cache_root is not None:
            folder = fresh_cache_folder(settings.cold_cache_root, f"{workload.name}-{impl.name}")
        records[impl.name], fn = _compile_and_check(
            impl, case, reference, settings.compile_limit_seconds, warm=not workload.group, cold_cache_folder=folder
        )
        if fn is not None:
            callables[impl.name] = fn
        summary = records[impl.name].get("error") or records[impl.name].get("correct")
        log(f"  {impl.name}: compiled in {time.perf_counter() - started:.1f}s, {summary}")

    steps = {name: (lambda fn=fn: case.run(fn)) for name, fn in callables.items()}
    calls = calls_per_sample(steps[EAGER], settings.sample_seconds)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # once per location: a recompile storm must not flood the report
        # a frame that falls back to eager after some calls (strict mode) is described by its cause
        describe = functools.partial(describe_error, stage="timing")
        stats, errors = interleaved(steps, calls, describe=describe, **settings.timing_for(workload))
    result["warnings_while_timing"] = list(dict.fromkeys(_first_line(str(w.message)) for w in caught if _is_ours(w)))
    result["calls_per_sample"] = calls
    eager_median = stats[EAGER].median
    for name, record in records.items():
        if name in errors:
            record["error"] = errors[name]
        if name in stats:
            low, speedup, high = paired_ratio(stats[EAGER], stats[name])
            record.update(
                min_s=stats[name].min,
                median_s=stats[name].median,
                max_s=stats[name].max,
                samples=stats[name].samples,
                speedup=speedup,
                speedup_quartiles=(low, high),
                speedup_of_medians=eager_median / stats[name].median,
                page_faults_per_call=stats[name].page_faults_per_call,
            )
            try:
                if record.get("correct") == "ok" and name not in (EAGER, EAGER_AGAIN):
                    # A stale cache entry or a guard that misses a change shows up only after many calls.
                    verdict = compare(_detach(steps[name]()), reference, case)
                    record["correct"] = "ok" if verdict == "ok" else f"after timing: {verdict}"
                record["peak_bytes"] = peak_bytes(steps[name])
            except Exception as exc:
                record["error"] = describe_error(exc, "the check after timing")
    result.update(noise_figures(stats))
    result["impls"] = records
    timed = ", ".join(
        f"{name} {record['median_s'] * 1e3:.3f}ms" for name, record in records.items() if "median_s" in record
    )
    log(f"  steady state ({calls} calls/sample): {timed}")
    return result


def noise_figures(stats: dict[str, Stats]) -> dict[str, Any]:
    """The noise floor (spread of eager's pooled samples), its verdict, and eager's paired ratio to itself.

    ``noise_floor_pct`` is None when too few samples were taken to estimate it (and the verdict says so).
    """
    repeats = [stats[name].per_round for name in (EAGER, EAGER_AGAIN) if name in stats]
    floor = noise_floor(*repeats)
    verdict = workload_verdict(floor)
    figures: dict[str, Any] = {
        "noise_floor_pct": 100.0 * floor if math.isfinite(floor) else None,
        "reliable": verdict.reliable,
        "unreliable_because": list(verdict.reasons),
    }
    if EAGER in stats and EAGER_AGAIN in stats:
        figures["eager_vs_itself_pct"] = 100.0 * abs(paired_ratio(stats[EAGER], stats[EAGER_AGAIN])[1] - 1.0)
    return figures


def run_extra(module_name: str, log: Callable[[str], None]) -> dict[str, Any] | None:
    """Run another benchmark module's ``main()`` in this process; None when the module is not there.

    Its printed output and return value go into the report as they are.
    """
    import contextlib
    import importlib
    import io

    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:
            return None
        return {"error": describe_error(exc, "import")}
    except Exception as exc:
        return {"error": describe_error(exc, "import")}
    main = getattr(module, "main", None)
    if not callable(main):
        return {"error": f"{module_name} has no main()"}
    buffer = io.StringIO()
    started = time.perf_counter()
    saved_argv, saved_threads = sys.argv, torch.get_num_threads()
    sys.argv = [module_name]
    try:
        with contextlib.redirect_stdout(buffer):
            returned = main()
        record: dict[str, Any] = {"output": buffer.getvalue()}
        if returned is not None and not isinstance(returned, int):
            record["returned"] = returned if isinstance(returned, (dict, list, str, float)) else repr(returned)
    except SystemExit as exc:
        record = {"output": buffer.getvalue()}
        if exc.code not in (0, None):
            record["error"] = f"exited with {exc.code}"
    except Exception as exc:
        record = {"output": buffer.getvalue(), "error": describe_error(exc)}
    finally:
        sys.argv = saved_argv
        torch.set_num_threads(saved_threads)  # a module may pin its own thread count
    record["seconds"] = time.perf_counter() - started
    log(f"  {module_name}: {record.get('error', 'done')} in {record['seconds']:.1f}s")
    return record
