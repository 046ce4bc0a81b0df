"""Compile a small transformer block with dynajit and show what a new user wants to see.

    python benchmarks/demo.py                  # nox -s demo
    python benchmarks/demo.py --backend eager  # capture only, graphs run as they are

Prints the graphs dynajit captured and why it broke any, the compile time, a
check against eager, and eager vs compiled speed (interleaved, with the noise
floor: the spread of eager's own repeated samples). When the machine is too busy
or the samples too spread to measure, it says so and marks the figures unreliable. dynajit runs strict (``DYNAJIT_STRICT=1``): when it cannot compile the block, or any of it
would run eagerly, it prints the error and exits 1.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time
import traceback
import warnings

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness.environment import ensure_bench_env  # noqa: E402  (no torch import yet)

COMPILE_LIMIT_SECONDS = 150.0


def fail(what: str, exc: BaseException) -> int:
    print(f"\n{what}:\n  {type(exc).__name__}: {exc}".rstrip())
    print("".join(traceback.format_exception(exc)[-4:]).rstrip(), file=sys.stderr)
    print("\nNo speed figures: dynajit did not produce a compiled model.")
    return 1


def explain_summary(model: object, inputs: tuple) -> str | None:
    """``dynajit.compiler.explain`` output when that function exists, else None."""
    import dynajit.compiler

    explain = getattr(dynajit.compiler, "explain", None)
    if explain is None:
        return None
    try:
        text = str(explain(model)(*inputs)).rstrip()
    except Exception as exc:
        return f"(explain failed: {type(exc).__name__}: {exc})"
    # The guard list is long and not what a first run is about; explain(...).guards has it.
    return text.split("\n  Guards:")[0].split("\nGuards:")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="inductor", help="dynajit backend name (default: inductor)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time budget for the speed comparison")
    args = parser.parse_args(argv)
    ensure_bench_env()

    import torch

    from harness.implementations import CountingBackend, LogCollector
    from harness.noise import machine_verdict, noise_floor, within_noise, workload_verdict
    from harness.runner import fallback_in
    from harness.timing import calls_per_sample, interleaved, paired_ratio, time_limit, timed_call
    from harness.workloads import make_transformer_case

    torch.set_num_threads(2)
    case = make_transformer_case()
    block, (x,) = case.target, case.inputs
    print(f"dynajit demo: a pre-norm transformer block, {sum(p.numel() for p in block.parameters()):,} parameters,")
    print(
        f"input {tuple(x.shape)}, torch {torch.__version__}, {torch.get_num_threads()} threads, backend {args.backend!r}"
    )

    logs = LogCollector()
    logs.install()
    try:
        import dynajit.compiler
        from dynajit.compiler._registry import lookup_backend

        counter = CountingBackend(lookup_backend(args.backend))
    except Exception as exc:
        return fail(f"dynajit or its backend {args.backend!r} is not available", exc)

    expected = case.run(block)
    try:
        with time_limit(COMPILE_LIMIT_SECONDS, "compiling the block"), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            compiled = dynajit.compiler.compile(block, backend=counter)
            compile_seconds, actual = timed_call(lambda: case.run(compiled))
    except Exception as exc:
        return fail("dynajit cannot compile the transformer block yet", exc)
    for warning in caught:
        warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
    fell_back = fallback_in(caught)
    if fell_back is not None:  # strict mode raises for capture's fallbacks; a backend's own is only a warning
        return fail("dynajit ran part of the transformer block eagerly", fell_back)
    if counter.graphs == 0:
        said = "; ".join(dict.fromkeys(str(w.message) for w in caught)) or "no warning given"
        return fail("dynajit compiled no graph for the transformer block (it ran eagerly)", RuntimeError(said))

    print(f"\ncompile time (first call): {compile_seconds:.2f}s")
    print(f"graphs handed to the backend: {counter.graphs}, ops in them: {counter.ops}")
    summary = explain_summary(block, (x,))
    if summary:
        print("\ndynajit.compiler.explain(block)(x):\n" + "\n".join(f"  {line}" for line in summary.splitlines()))
    else:
        breaks = logs.messages["graph_breaks"]
        print(f"graph breaks: {len(breaks)}")
        for message in dict.fromkeys(breaks):
            print(f"  - {message}")
    try:
        torch.testing.assert_close(actual, expected, rtol=case.rtol, atol=case.atol)
    except AssertionError as exc:
        return fail("the compiled block does not match eager", exc)
    print("\noutput matches eager: yes")

    started = time.perf_counter()
    load_before = os.getloadavg()
    steps = {
        "eager": lambda: case.run(block),
        "eager (again)": lambda: case.run(block),
        "dynajit": lambda: case.run(compiled),
    }
    calls = calls_per_sample(steps["eager"], 0.02)
    stats, errors = interleaved(steps, calls, budget_seconds=args.seconds, min_rounds=10, max_rounds=300)
    if errors:
        return fail("the compiled block failed while being timed", RuntimeError("; ".join(errors.values())))
    print(
        f"\nspeed ({stats['eager'].samples} interleaved samples of {calls} calls each, "
        f"{time.perf_counter() - started:.0f}s):"
    )
    for name, stat in stats.items():
        print(f"  {name:14s} median {stat.median * 1e3:8.3f} ms   (min {stat.min * 1e3:.3f}, max {stat.max * 1e3:.3f})")
    floor = noise_floor(stats["eager"].per_round, stats["eager (again)"].per_round)
    low, speedup, high = paired_ratio(stats["eager"], stats["dynajit"])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    verdicts = [workload_verdict(floor), machine_verdict([load_before, os.getloadavg()], cores)]
    reasons = [reason for verdict in verdicts for reason in verdict.reasons]
    print(
        f"noise floor: {floor:.1%} ((p90-p10)/median of eager's {2 * stats['eager'].samples} samples; "
        "a speedup within it is noise)"
    )
    if reasons:
        print(f"speedup over eager: {speedup:.2f}x?  UNRELIABLE: {'; '.join(reasons)}.")
        print(
            "  This machine is too noisy to measure now: rerun when it is idle (graphs and correctness above stand;\n  the compile time is inflated by the load too)."
        )
    else:
        verdict = "within the noise floor: no measurable difference" if within_noise(speedup, floor) else "measured"
        print(f"speedup over eager: {speedup:.2f}x (quartiles of per-round ratios {low:.2f}-{high:.2f}; {verdict})")
    recompiles = logs.messages["recompiles"]
    if recompiles:
        print(f"recompiles while timing: {len(recompiles)} (first: {recompiles[0]})")
    print(
        "\nnext: DYNAJIT_LOGS=graph_breaks,recompiles python your_script.py shows breaks and recompiles as they"
        " happen;\n      python -m nox -s bench compares eager, torch.compile and dynajit on more workloads."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
