"""The fuzzer's command line: generate, run, group failures into classes, shrink one program per class.

``python -m tests.fuzz --seed 1 --count 200`` runs programs ``1:0`` to
``1:199``; ``--minutes 30`` runs until the time is up instead; ``--jobs 2``
runs two fuzzers side by side, on seeds ``1-0`` and ``1-1``. A program is
named by ``<seed>:<index>`` and the features, so any reported program can be
run again alone with ``--seed S --start I --count 1``. ``--ledger`` appends each
finished run to ``tests/fuzz/ledger.jsonl`` with the product it ran against;
``--tally`` adds the ledger up.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

from .features import CI_EXCLUDED, Features
from .generator import generate
from .ledger import DEFAULT as DEFAULT_LEDGER
from .ledger import describe, record
from .program import Program, repro_script
from .runner import BACKENDS, Failure, check, warm_up
from .shrink import shrink


@dataclass
class FailureClass:
    """Programs that failed the same way, and the first one shrunk."""

    key: str
    first: Failure
    seeds: list[str] = field(default_factory=list)
    backends: set[str] = field(default_factory=set)
    repro: str = ""


@dataclass
class Report:
    """What a fuzzing run found."""

    programs: int = 0
    seconds: float = 0.0
    classes: dict[str, FailureClass] = field(default_factory=dict)

    def summary(self) -> str:
        lines = [f"{self.programs} programs in {self.seconds:.0f}s, {len(self.classes)} failure classes"]
        for cls in self.classes.values():
            backends = ",".join(sorted(cls.backends))
            lines.append(f"- [{len(cls.seeds)}x] {backends} {cls.key}  (e.g. {', '.join(cls.seeds[:3])})")
        return "\n".join(lines)


def fuzz(
    seed: str,
    count: int | None = None,
    minutes: float | None = None,
    features: Features | None = None,
    backends: tuple[str, ...] = BACKENDS,
    start: int = 0,
    shrink_seconds: float = 240.0,
    max_statements: int = 12,
    out: pathlib.Path | None = None,
    log=print,
) -> Report:
    """Run programs ``seed:start`` onwards until ``count`` programs or ``minutes`` have passed."""
    features = features or Features()
    report = Report()
    began = time.monotonic()
    index = start
    while True:
        if count is not None and report.programs >= count:
            break
        if minutes is not None and time.monotonic() - began > minutes * 60:
            break
        name = f"{seed}:{index}"
        index += 1
        if out is not None:  # names the program running, should the process die in a compiled kernel
            out.mkdir(parents=True, exist_ok=True)
            (out / "current").write_text(name)
        program = generate(name, features, max_statements)
        failures = check(program, backends, tag=name.replace(":", "_"))
        report.programs += 1
        for failure in failures:
            _record(report, name, program, failure, shrink_seconds, out, log)
        if report.programs % 25 == 0:
            log(f"[{time.monotonic() - began:.0f}s] {report.programs} programs, {len(report.classes)} failure classes")
    report.seconds = time.monotonic() - began
    return report


def _record(
    report: Report,
    name: str,
    program: Program,
    failure: Failure,
    shrink_seconds: float,
    out: pathlib.Path | None,
    log,
) -> None:
    key = failure.failure_class
    known = report.classes.get(key)
    if known is not None:
        known.backends.add(failure.backend)
        if name not in known.seeds:
            known.seeds.append(name)
        log(f"{name}: {failure.backend} {key} (known)")
        return
    log(f"{name}: NEW {failure.backend} {key}\n  {failure.detail[:400]}")
    cls = report.classes[key] = FailureClass(key, failure, [name], {failure.backend})
    small, small_failure = program, failure
    if shrink_seconds > 0:
        small, small_failure = shrink(program, failure, shrink_seconds)
    cls.repro = (
        f"# fuzz program {name}, {failure.backend}: {small_failure.kind} {small_failure.exc}\n"
        + "".join(f"# {line}\n" for line in small_failure.detail[:300].splitlines())
        + repro_script(small, failure.backend, small_failure.kind)
    )
    log(cls.repro)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / f"class{len(report.classes):02d}_{name.replace(':', '_')}.py").write_text(cls.repro)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("--seed", default=None, help="run seed (default: a random one, printed)")
    parser.add_argument("--count", type=int, default=None, help="number of programs")
    parser.add_argument("--minutes", type=float, default=None, help="run for this long instead")
    parser.add_argument("--start", type=int, default=0, help="index of the first program")
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated backends")
    parser.add_argument("--disable", default="", help="comma-separated features to switch off")
    parser.add_argument("--only", default="", help="comma-separated features: only these on")
    parser.add_argument("--ci", action="store_true", help="the CI feature set (known-bug features off)")
    parser.add_argument("--max-statements", type=int, default=12)
    parser.add_argument("--shrink-seconds", type=float, default=240.0, help="0: do not shrink")
    parser.add_argument("--out", type=pathlib.Path, default=None, help="write each class's repro here")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes, each on seed <seed>-<job>")
    parser.add_argument("--chunk", type=int, default=1000, help="with --jobs: programs per worker process")
    parser.add_argument(
        "--ledger",
        type=pathlib.Path,
        nargs="?",
        const=DEFAULT_LEDGER,
        default=None,
        help=f"append each finished run, with the product it ran against, to this file (default {DEFAULT_LEDGER.name})",
    )
    parser.add_argument("--tally", action="store_true", help="add up the ledger's runs per product and stop")
    parser.add_argument("--list-features", action="store_true")
    args = parser.parse_args(argv)
    if args.list_features:
        print("\n".join(Features.names()))
        return 0
    if args.tally:
        print(describe(args.ledger or DEFAULT_LEDGER))
        return 0
    features = Features().only(*args.only.split(",")) if args.only else Features()
    if args.ci:
        features = features.without(*CI_EXCLUDED)
    if args.disable:
        features = features.without(*args.disable.split(","))
    seed = args.seed if args.seed is not None else str(random.randrange(10**6))
    count = args.count if args.count is not None or args.minutes is not None else 100
    if args.jobs > 1:
        passed = argv if argv is not None else sys.argv[1:]
        passed = _without_options(passed, {"--ledger"})
        if args.ledger is not None:  # each job's processes run in the repository: a relative path would move
            passed = [*passed, f"--ledger={args.ledger.resolve()}"]
        return _parallel(seed, args.jobs, count, passed, args.out, args.minutes, args.start, args.chunk)
    off = [n for n in Features.names() if not getattr(features, n)]
    print(f"fuzz seed {seed}, backends {args.backends}, features off: {off or 'none'}", flush=True)
    warm_up(tuple(args.backends.split(",")))
    report = fuzz(
        seed,
        count=count,
        minutes=args.minutes,
        features=features,
        backends=tuple(args.backends.split(",")),
        start=args.start,
        shrink_seconds=args.shrink_seconds,
        max_statements=args.max_statements,
        out=args.out,
        log=lambda text: print(text, flush=True),
    )
    print(report.summary())
    if args.ledger is not None and report.programs:
        record(args.ledger, seed, args.start, report.programs, sorted(report.classes), log=print)
    return 1 if report.classes else 0


_SUMMARY = re.compile(r"(\d+) programs in \d+s, (\d+) failure classes")  # a fuzz run's last line
_REPOSITORY = pathlib.Path(__file__).resolve().parents[2]  # where ``python -m tests.fuzz`` finds the package


def _parallel(
    seed: str,
    jobs: int,
    count: int | None,
    argv: list[str],
    out: pathlib.Path | None,
    minutes: float | None = None,
    start: int = 0,
    chunk: int = 1000,
) -> int:
    """Run ``jobs`` fuzzers side by side, job ``i`` on seed ``<seed>-<i>`` (its repros in ``<out>/<i>``), each
    with a share of ``count``; their lines are printed as they come, prefixed with the job, then the totals.

    A job runs as a sequence of processes of at most ``chunk`` programs each, every one going on from the index
    where the last stopped: a process never unloads the kernel libraries it compiled, and after about 3,300
    programs one reached the kernel's limit of memory mappings (``vm.max_map_count``), where every load fails.
    """
    passed = _without_options(argv, {"--seed", "--jobs", "--count", "--out", "--minutes", "--start", "--chunk"})
    share = None if count is None else -(-count // jobs)
    began = time.monotonic()
    summaries: list[str] = [""] * jobs
    codes: list[int] = [0] * jobs

    def run_job(job: int) -> None:
        index, done, classes = start, 0, 0
        while share is None or done < share:
            left = None if minutes is None else minutes - (time.monotonic() - began) / 60
            if left is not None and left <= 0:
                break
            n = chunk if share is None else min(chunk, share - done)
            command = [sys.executable, "-m", "tests.fuzz", "--seed", f"{seed}-{job}", "--start", str(index)]
            command += [*passed, "--count", str(n), *(["--minutes", str(left)] if left is not None else [])]
            command += ["--out", str(out / str(job))] if out is not None else []
            proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=_REPOSITORY
            )
            summary = None
            for line in proc.stdout:  # type: ignore[union-attr]
                print(f"[job {job}] {line}", end="", flush=True)
                summary = _SUMMARY.match(line) or summary
            code = proc.wait()
            codes[job] = codes[job] or code
            if summary is None or int(summary.group(1)) == 0:  # died, or ran out of time at once: no progress
                codes[job] = codes[job] or 1
                break
            index, done, classes = (
                index + int(summary.group(1)),
                done + int(summary.group(1)),
                classes + int(summary.group(2)),
            )
        summaries[job] = f"{done} programs in {time.monotonic() - began:.0f}s, {classes} failure classes"

    threads = [threading.Thread(target=run_job, args=(job,)) for job in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    totals = [_SUMMARY.match(line) for line in summaries]
    programs = sum(int(m.group(1)) for m in totals if m)
    classes = sum(int(m.group(2)) for m in totals if m)
    print(f"{jobs} jobs: {programs} programs, {classes} failure classes (seeds {seed}-0 .. {seed}-{jobs - 1})")
    return 1 if any(codes) else 0


def _without_options(argv: list[str], names: set[str]) -> list[str]:
    """``argv`` without the options ``names`` and their values (``--x v``, ``--x=v``, or a bare ``--x``)."""
    kept, skip = [], False
    for arg in argv:
        if skip and not arg.startswith("--"):
            skip = False
            continue
        skip = arg in names
        if not skip and arg.split("=", 1)[0] not in names:
            kept.append(arg)
    return kept


if __name__ == "__main__":
    sys.exit(main())
