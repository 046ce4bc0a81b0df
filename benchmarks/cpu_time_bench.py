"""Speed on a busy machine: eager vs dynajit vs torch.compile by the CPU time of one thread, on real models.

Run: ``python benchmarks/cpu_time_bench.py [--only llama-default,bert-train] [--rounds 30] [--torch-compile]``.

Every implementation runs at one thread (``torch.set_num_threads(1)``) and each call is timed with
``time.thread_time()``: the CPU time of the calling thread, which other processes on the machine
barely move (wall time doubles when another process shares the core; CPU time does not). The
implementations are interleaved, one call each per round, each on its own copy of the model built from
the same seed; the table gives each one's median and its speedup over eager's median. This is the
check to make while the machine is busy (a long fuzzer run); ``nox -s bench`` (wall time at the
machine's thread count, noise floors, the README's table) is the measurement of record.
"""

from __future__ import annotations

import argparse
import functools
import pathlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness.implementations import DynajitImpl, EagerImpl, Implementation, LogCollector, TorchCompileImpl  # noqa: E402
from harness.real_models import real_models  # noqa: E402
from harness.report import model_row  # noqa: E402

DEFAULT_MODELS = "llama-default,bert-default,t5-default,gpt2-default,mobilenet_v2,convnext,llama-train,bert-train"


def measure(names: list[str], impls: list[Implementation], rounds: int) -> list[tuple[str, dict[str, float | str]]]:
    """Per model, each implementation's median CPU seconds per call (or why it could not run)."""
    by_name = {w.name: w for w in real_models()}
    rows = []
    for name in names:
        workload = by_name[name]
        reason = workload.unavailable()
        medians: dict[str, float | str] = {}
        if reason:
            rows.append((name, {impl.name: reason for impl in impls}))
            continue
        calls: dict[str, Callable[[], Any]] = {}
        for impl in impls:
            try:
                case = workload.build()
                fn = impl.wrap(case.target)
                call = functools.partial(case.run, fn)
                for _ in range(3):  # compile, then warm what the first calls set up
                    call()
                calls[impl.name] = call
            except Exception as exc:
                lines = str(exc).splitlines()
                medians[impl.name] = f"{type(exc).__name__}: {lines[0] if lines else ''}"
        samples: dict[str, list[float]] = {key: [] for key in calls}
        for _ in range(rounds):
            for key, call in calls.items():
                start = time.thread_time()
                call()
                samples[key].append(time.thread_time() - start)
        medians.update({key: statistics.median(values) for key, values in samples.items()})
        for impl in impls:
            impl.reset()
        rows.append((name, medians))
        print(_row(name, medians, impls), flush=True)
    return rows


def _row(name: str, medians: dict[str, float | str], impls: list[Implementation]) -> str:
    return model_row(
        name,
        medians,
        [impl.name for impl in impls],
        lambda value: f"{value * 1e3:.3f}",
        lambda value, eager: f"{value * 1e3:.3f} ({eager / value:.2f}x)",
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=DEFAULT_MODELS, help="comma-separated zoo model names")
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds (one call per implementation)")
    parser.add_argument("--backend", default="inductor", help="dynajit backend to measure")
    parser.add_argument("--torch-compile", action="store_true", help="measure torch.compile too")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    logs = LogCollector()
    logs.install()
    impls: list[Implementation] = [EagerImpl("eager"), DynajitImpl(args.backend, logs)]
    if args.torch_compile:
        impls.append(TorchCompileImpl())
    print(f"median CPU ms of one call at one thread, over {args.rounds} interleaved rounds (speedup over eager)")
    print("| model | " + " | ".join(impl.name for impl in impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    measure([name.strip() for name in args.only.split(",") if name.strip()], impls, args.rounds)


if __name__ == "__main__":
    main()
