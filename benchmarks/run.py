"""Benchmark eager, torch.compile and dynajit side by side in one process and write the reports.

    python benchmarks/run.py                        # the full suite (nox -s bench)
    python benchmarks/run.py --quick                # a short run, no real models (nox -s bench -- --quick)
    python benchmarks/run.py --only resnet18,bert-default   # some workloads or zoo models by name

Writes ``results/latest.md``, ``results/latest.json`` and ``results/speedups.png``
(``--out`` elsewhere). What is measured and how: ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness.environment import ensure_bench_env, isolate_compile_caches  # noqa: E402  (no torch import yet)

EXTRA_BENCHMARKS = ("guards_bench", "overhead_bench", "dynamic_bench")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer samples and no real models (under 3 minutes)")
    parser.add_argument("--only", default="", help="comma-separated workload names to run (default: the suite)")
    parser.add_argument("--generate", action="store_true", help="add the zoo's generate (greedy decoding) models")
    parser.add_argument(
        "--max-minutes",
        type=float,
        default=25.0,
        help="stop starting real models (and the other benchmark modules) after this many minutes; the rest show as "
        "skipped (0: no limit)",
    )
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "results", help="directory for the reports")
    parser.add_argument(
        "--dynajit-backends",
        default="inductor",
        help="comma-separated dynajit backends to measure; 'eager' joins automatically when inductor cannot compile",
    )
    parser.add_argument("--no-torch-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--no-extra", action="store_true", help="skip guards_bench / overhead_bench")
    parser.add_argument("--extra", action="store_true", help="run guards_bench / overhead_bench with --quick too")
    parser.add_argument("--keep-caches", action="store_true", help="reuse the usual on-disk compile caches")
    return parser.parse_args(argv)


def select_workloads(only: str, quick: bool, generate: bool = False) -> tuple[list, list[str]]:
    """The workloads to run (``--only`` names, else the suite for the mode) and notes on what was left out."""
    from harness.real_models import real_models
    from harness.workloads import SUITE

    wanted = {name.strip() for name in only.split(",") if name.strip()}
    # a generate model named with --only joins without --generate
    models = real_models(generate=True)
    known = [*SUITE, *(w for w in models if generate or w.group != "generate" or w.name in wanted)]
    unknown = wanted - {w.name for w in [*SUITE, *models]}
    if unknown:
        raise SystemExit(f"unknown workload(s) {sorted(unknown)}; known: {[w.name for w in known]}")
    if wanted:
        return [w for w in known if w.name in wanted], []
    chosen = interleave_groups([w for w in known if w.in_quick or not quick])
    left_out = [w.name for w in known if w not in chosen]
    return chosen, [f"{len(left_out)} real models left out of --quick runs: {', '.join(left_out)}"] if left_out else []


def interleave_groups(workloads: list) -> list:
    """The small programs first, then the real models taking each group in turn (cnn, transformer, training, ...),
    so a run cut short by ``--max-minutes`` still measures some models of every group."""
    small = [w for w in workloads if not w.group]
    queues: dict[str, list] = {}
    for workload in workloads:
        if workload.group:
            queues.setdefault(workload.group, []).append(workload)
    ordered = []
    while any(queues.values()):
        for queue in queues.values():
            if queue:
                ordered.append(queue.pop(0))
    return small + ordered


def start_up(impls: list, backends: list[str], logs, settings, log) -> tuple[dict[str, str], list[str]]:
    """Compile a trivial function with each implementation (paying one-off costs outside the workloads).

    When dynajit's inductor backend cannot, ``dynajit[eager]`` joins ``impls`` so capture is still measured.
    """
    from harness.implementations import DynajitImpl
    from harness.runner import describe_error, startup_seconds
    from harness.timing import time_limit

    startup: dict[str, str] = {}
    notes: list[str] = []
    for impl in impls:  # a fallback appended below is started up too
        try:
            with time_limit(settings.compile_limit_seconds, f"{impl.name} start-up"):
                startup[impl.name] = f"{startup_seconds(impl):.2f}s"
        except Exception as exc:
            startup[impl.name] = describe_error(exc)
        log(f"  {impl.name}: {startup[impl.name]}")
        if impl.name == "dynajit[inductor]" and startup[impl.name].startswith("failed") and "eager" not in backends:
            impls.append(DynajitImpl("eager", logs))
            notes.append(
                "dynajit[inductor] could not compile a trivial function, so dynajit[eager] (captured graphs run "
                "as they are) is measured too, to show capture's own cost"
            )
    return startup, notes


def run_extras(settings, log) -> dict:
    """Run the other benchmark modules present next to this file through their ``main()``."""
    from harness.runner import describe_error, run_extra
    from harness.timing import time_limit

    extra = {}
    for name in EXTRA_BENCHMARKS:
        if not (HERE / f"{name}.py").exists():
            continue
        log(f"{name}:")
        try:
            with time_limit(settings.compile_limit_seconds * 2, name):
                record = run_extra(name, log)
        except TimeoutError as exc:
            record = {"error": describe_error(exc)}
        if record is not None:
            extra[name] = record
    return extra


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_bench_env()
    cache_root = None if args.keep_caches else isolate_compile_caches()
    started = time.perf_counter()
    load_at_start = os.getloadavg()

    import torch

    from harness import report
    from harness.environment import machine_facts, point_dynajit_cache_at, source_revision
    from harness.implementations import DynajitImpl, Implementation, LogCollector, TorchCompileImpl
    from harness.noise import machine_verdict
    from harness.runner import EAGER, EAGER_AGAIN, Settings, bench_workload

    def log(message: str) -> None:
        print(message, flush=True)

    settings = Settings.quick() if args.quick else Settings()
    settings.cold_cache_root = cache_root  # each workload's cold compiles start from empty caches
    suite, notes = select_workloads(args.only, args.quick, args.generate)
    torch.set_num_threads(int(machine_facts()["env"]["OMP_NUM_THREADS"]))
    machine = machine_facts()  # now, before anything run later can change the thread count
    logs = LogCollector()
    logs.install()
    impls: list[Implementation] = [] if args.no_torch_compile else [TorchCompileImpl()]
    backends = [name.strip() for name in args.dynajit_backends.split(",") if name.strip()]
    impls += [DynajitImpl(name, logs) for name in backends]
    if cache_root:
        changed = point_dynajit_cache_at(cache_root)
        notes.append(f"compile caches isolated in a fresh directory; dynajit config fields set: {changed or 'none'}")

    log("start-up compiles:")
    startup, startup_notes = start_up(impls, backends, logs, settings, log)
    notes += startup_notes

    workloads = []
    active = list(impls)
    for workload in suite:
        minutes = (time.perf_counter() - started) / 60
        if workload.group and args.max_minutes and minutes > args.max_minutes:
            reason = f"not run: the run passed --max-minutes {args.max_minutes:g} ({minutes:.0f} min)"
            workloads.append(
                {
                    "name": workload.name,
                    "description": workload.description,
                    "group": workload.group,
                    "status": "skipped",
                    "skip_reason": reason,
                    "impls": {},
                }
            )
            continue
        log(f"{workload.name}: {workload.description}")
        load = os.getloadavg()
        result = bench_workload(workload, active, settings, log)
        result["load_average"] = [load, os.getloadavg()]
        workloads.append(result)
        if torch.get_num_threads() != machine["torch_threads"]:
            notes.append(f"torch's thread count changed to {torch.get_num_threads()} during {workload.name}; reset")
            torch.set_num_threads(machine["torch_threads"])
        for impl in list(active):
            error = result["impls"].get(impl.name, {}).get("error", "")
            if "TimeoutError" in error:
                active.remove(impl)
                notes.append(f"{impl.name} left out after {workload.name}: {error}")

    extra = {}
    if args.quick and not args.extra:
        notes.append(f"{', '.join(EXTRA_BENCHMARKS)}: left out of --quick runs (add --extra to run them)")
    elif args.max_minutes and (time.perf_counter() - started) / 60 > args.max_minutes:
        notes.append(f"{', '.join(EXTRA_BENCHMARKS)}: not run, the run passed --max-minutes {args.max_minutes:g}")
    elif not args.no_extra:
        extra = run_extras(settings, log)

    results = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if args.quick else "full",
        "command": " ".join(["python benchmarks/run.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine,
        "revision": source_revision(),
        "settings": vars(settings),
        "implementations": [EAGER, EAGER_AGAIN, *(impl.name for impl in impls)],
        "startup": startup,
        "workloads": workloads,
        "extra": extra,
        "notes": notes,
        "total_seconds": time.perf_counter() - started,
        "load_average": {"start": load_at_start, "end": os.getloadavg()},
    }
    verdict = machine_verdict([load_at_start, results["load_average"]["end"]], machine["cores_usable"])
    results["reliable"] = verdict.reliable
    results["unreliable_because"] = list(verdict.reasons)
    args.out.mkdir(parents=True, exist_ok=True)
    chart_problem = report.write_chart(results, args.out / "speedups.png")
    results["chart"] = chart_problem is None
    if chart_problem:
        notes.append(chart_problem)
        (args.out / "speedups.png").unlink(missing_ok=True)  # a chart of an earlier run would contradict the tables
    report.write_json(results, args.out / "latest.json")
    report.write_markdown(results, args.out / "latest.md")
    print("\n".join(["", *report.summary_table(results), "", report.headline(results), ""]))
    if args.out.resolve() == (HERE / "results").resolve() and not args.only and not args.quick:
        report.update_readme(results, HERE / "README.md", "results", per_model=True)
        report.update_readme(results, HERE.parent / "README.md", "benchmarks/results", per_model=True)
    log(f"done in {results['total_seconds']:.0f}s: {args.out / 'latest.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
