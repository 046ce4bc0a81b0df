"""Where a real model's steady call spends its CPU: microseconds per call by library and by symbol, per implementation.

Run: ``OMP_NUM_THREADS=1 python benchmarks/step_perf.py [--only llama-train] [--impls dynajit,torch.compile,eager]
[--seconds 20] [--top 25]``. For each implementation a child process compiles the model, warms it up and then
calls it in a loop; Linux ``perf record -e cpu-clock`` samples that process for ``--seconds`` while it counts its
calls, and ``perf report`` gives the samples of each shared object and symbol, divided here by the calls made in
the window. Samples are of the process's own CPU time, so the split survives other load on the machine (the
totals grow with it, the shares barely move): this answers "where does dynajit spend the time torch.compile does
not" while a fuzzer runs. It needs ``perf`` (``linux-perf`` on Debian) and ``kernel.perf_event_paranoid`` at most
2; it names no Python function (CPython's frames show as ``_PyEval_EvalFrameDefault``), for which ``py-spy`` serves.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

IMPLS = ("dynajit", "torch.compile", "eager")


def child(model: str, impl: str) -> None:
    """Compile ``model`` with ``impl``, warm up, print ``READY``, then call it until killed; SIGUSR1 prints the
    number of calls made so far."""
    from harness.implementations import DynajitImpl, EagerImpl, LogCollector, TorchCompileImpl
    from harness.real_models import real_models

    case = {w.name: w for w in real_models()}[model].build()
    wrapper = {"dynajit": lambda: DynajitImpl("inductor", LogCollector()), "torch.compile": TorchCompileImpl}
    fn = wrapper.get(impl, lambda: EagerImpl("eager"))().wrap(case.target)
    for _ in range(20):
        case.run(fn)
    calls = [0]
    signal.signal(signal.SIGUSR1, lambda *_: print(f"CALLS {calls[0]}", flush=True))
    print("READY", flush=True)
    while True:
        case.run(fn)
        calls[0] += 1


def _sample(model: str, impl: str, seconds: float, data: str) -> int:
    """Calls made while ``perf`` recorded the child for ``seconds``."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", model, impl], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.startswith("READY"):
                break
        else:
            raise RuntimeError(f"{impl} on {model}: the child process ended before it was ready")

        def calls_so_far() -> int:
            os.kill(proc.pid, signal.SIGUSR1)
            return int(next(line for line in proc.stdout if line.startswith("CALLS")).split()[1])

        before = calls_so_far()
        record = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "1000", "-p", str(proc.pid), "-o", data]
        subprocess.run(
            [*record, "--", "sleep", str(seconds)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return calls_so_far() - before
    finally:
        proc.kill()
        proc.wait()


def _per_call(data: str, key: str, calls: int) -> dict[str, float]:
    """Microseconds per call of each ``key`` (``dso`` or ``sym``) in the recording ``data``."""
    report = subprocess.run(
        ["perf", "report", "-i", data, "--sort", key, "--no-children", "-n", "--stdio"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return parse_report(report, key, calls)


def parse_report(report: str, key: str, calls: int) -> dict[str, float]:
    """``perf report -n --stdio`` text as microseconds per call of each name: a sample is a millisecond of CPU
    (``-F 1000``), shared by the ``calls`` made while recording."""
    out: collections.Counter[str] = collections.Counter()
    for line in report.splitlines():
        fields = line.split()
        if len(fields) < 3 or not fields[0].endswith("%") or not fields[1].isdigit():
            continue
        name = " ".join(fields[2:] if key == "dso" else fields[3:])  # a symbol follows its "[.]" or "[k]"
        out[name[:90]] += int(fields[1]) * 1000.0 / max(calls, 1)
    return dict(out)


def _table(title: str, rows: dict[str, dict[str, float]], impls: list[str], top: int) -> None:
    names = sorted({n for r in rows.values() for n in r}, key=lambda n: -max(r.get(n, 0.0) for r in rows.values()))
    print(f"\n{title} (us per call)")
    print("| name | " + " | ".join(impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    for name in names[:top]:
        print(f"| `{name}` | " + " | ".join(f"{rows[i].get(name, 0.0):.1f}" for i in impls) + " |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="llama-train", help="comma-separated zoo model names")
    parser.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated, of {', '.join(IMPLS)}")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of recording per implementation")
    parser.add_argument("--top", type=int, default=25, help="symbols shown")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "IMPL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    if shutil.which("perf") is None:
        sys.exit("step_perf.py needs Linux perf: apt-get install linux-perf")
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    unknown = sorted(set(impls) - set(IMPLS))
    if unknown:
        sys.exit(f"unknown implementations {unknown}; known: {', '.join(IMPLS)}")
    with tempfile.TemporaryDirectory() as tmp:
        for model in [m.strip() for m in args.only.split(",") if m.strip()]:
            dsos, syms = {}, {}
            for impl in impls:
                data = str(pathlib.Path(tmp) / f"{impl}.data")
                started = time.monotonic()
                calls = _sample(model, impl, args.seconds, data)
                dsos[impl], syms[impl] = _per_call(data, "dso", calls), _per_call(data, "sym", calls)
                total = sum(dsos[impl].values())
                print(
                    f"{model} {impl}: {calls} calls in the window, {total:.0f} us of CPU a call "
                    f"({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
            _table(f"{model}: by library", dsos, impls, args.top)
            _table(f"{model}: by symbol", syms, impls, args.top)


if __name__ == "__main__":
    main()
