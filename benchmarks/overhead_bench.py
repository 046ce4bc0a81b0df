"""Per-call overhead of a compiled function: ``x + 1`` on an 8-element tensor, compiled minus eager.

Measures, in one process and interleaved round by round (so machine noise
hits every implementation alike), the median time per call of (module rows:
the same ``x + 1`` as an ``nn.Module``, compared with calling it eagerly):

- eager ``x + 1``;
- dynajit with the eager backend (captured graph run as-is);
- dynajit with ``dynajit.inductor_lite.compile_fx`` (when importable and it compiles);
- ``torch.compile(backend="eager")``, the reference;
- the module eagerly, through ``dynajit.compiler.compile`` (``OptimizedModule``) and through ``torch.compile``.

It also times dynajit's guard check alone, to show how much of the overhead is
guards and how much is the dispatcher. Run ``python benchmarks/overhead_bench.py``;
the benchmark harness calls :func:`main`, which prints a Markdown table and
returns the figures as a dict.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


class AddOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


# Rows timed against eager "module" calls rather than eager function calls.
MODULE_BASELINE = "eager module"


def _per_call_seconds(fn: Callable[[], Any], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def _candidates(x: torch.Tensor) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """The implementations to time (each a no-argument callable, already compiled and checked) and the skipped ones."""
    import dynajit.capture as capture

    def eager_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        return gm.forward

    compilers: dict[str, Callable[[], Callable[..., Any]]] = {
        "dynajit[eager]": lambda: capture.optimize(eager_backend)(add_one),
        "torch.compile[eager]": lambda: torch.compile(add_one, backend="eager"),
    }
    try:
        from dynajit.inductor_lite import compile_fx

        compilers["dynajit[inductor_lite]"] = lambda: capture.optimize(compile_fx)(add_one)
    except ImportError as exc:
        skipped = {"dynajit[inductor_lite]": f"not importable: {exc}"}
    else:
        skipped = {}

    module = AddOne()
    compilers["torch.compile module[eager]"] = lambda: torch.compile(module, backend="eager")
    try:
        import dynajit.compiler

        compilers["dynajit module[eager]"] = lambda: dynajit.compiler.compile(module, backend="eager")
    except ImportError as exc:
        skipped["dynajit module[eager]"] = f"not importable: {exc}"

    timed: dict[str, Callable[[], Any]] = {"eager": lambda: add_one(x), MODULE_BASELINE: lambda: module(x)}
    expected = add_one(x)
    for name, make in compilers.items():
        try:
            compiled = make()
            torch.testing.assert_close(compiled(x), expected)
            torch.testing.assert_close(compiled(x), expected)
        except Exception as exc:  # a compiler that fails is reported, not fatal
            skipped[name] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            continue
        timed[name] = lambda compiled=compiled: compiled(x)
    guard = _dynajit_guard_check(timed, x)
    if guard is not None:
        timed["dynajit guard check alone"] = guard
    return timed, skipped


def _dynajit_guard_check(timed: dict[str, Callable[[], Any]], x: torch.Tensor) -> Callable[[], Any] | None:
    """The compiled guard of dynajit[eager]'s entry, called as its dispatcher calls it (before any scope is set)."""
    import dynajit.capture as capture

    if "dynajit[eager]" not in timed:
        return None
    compiled = capture.optimize(lambda gm, example_inputs: gm.forward)(add_one)
    compiled(x)
    state = compiled._dynajit_compiled
    if not state.ordered or state.ordered[0][1].check is None:
        return None
    check = state.ordered[0][1].check
    if not check(x):
        raise RuntimeError("dynajit's guard check fails on the input it was compiled for")
    return lambda: check(x)


def measure(rounds: int = 41, calls: int = 2000) -> dict[str, Any]:
    """Time every implementation for ``rounds`` interleaved rounds of ``calls`` calls each."""
    x = torch.randn(8)
    timed, skipped = _candidates(x)
    samples: dict[str, list[float]] = {name: [] for name in timed}
    for fn in timed.values():  # warm up
        _per_call_seconds(fn, calls // 10)
    for round_index in range(rounds):
        names = list(timed)
        if round_index % 2:
            names.reverse()
        for name in names:
            samples[name].append(_per_call_seconds(timed[name], calls))
    eager = {"": statistics.median(samples["eager"]), "module": statistics.median(samples[MODULE_BASELINE])}
    results = {}
    for name, values in samples.items():
        median = statistics.median(values)
        baseline = eager["module" if "module" in name else ""]
        results[name] = {
            "median_us": median * 1e6,
            "min_us": min(values) * 1e6,
            "max_us": max(values) * 1e6,
            "overhead_us": None
            if name in ("eager", MODULE_BASELINE, "dynajit guard check alone")
            else (median - baseline) * 1e6,
        }
    return {
        "workload": "x + 1, 8 float32 elements",
        "rounds": rounds,
        "calls_per_round": calls,
        "results": results,
        "skipped": skipped,
    }


def format_table(figures: dict[str, Any]) -> str:
    """A Markdown table of ``measure()``'s figures."""
    lines = [
        f"Per-call overhead: {figures['workload']}, median of {figures['rounds']} interleaved rounds "
        f"of {figures['calls_per_round']} calls",
        "",
        "| implementation | median µs/call | min | max | overhead vs eager (module rows: eager module) µs |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in figures["results"].items():
        overhead = "" if row["overhead_us"] is None else f"{row['overhead_us']:.2f}"
        lines.append(f"| {name} | {row['median_us']:.2f} | {row['min_us']:.2f} | {row['max_us']:.2f} | {overhead} |")
    for name, reason in figures["skipped"].items():
        lines.append(f"| {name} | {reason} | | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Measure, print the Markdown table and return the figures (``skipped``: implementations left out, and why)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv if argv is not None else [])
    torch.set_num_threads(1)
    figures = measure(args.rounds, args.calls)
    print(format_table(figures))
    return figures


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
