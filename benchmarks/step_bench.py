"""CPU time per step on one thread: eager, torch.compile and dynajit, alternating, on real models.

Run: ``OMP_NUM_THREADS=1 python benchmarks/step_bench.py [--only llama-train,bert-train] [--steps 1500]
[--rounds 3]``. Each round times ``--steps`` steps of every implementation in turn (after ten warm-up steps),
as process CPU time on one thread, and the table keeps each implementation's least time per step over the
rounds. CPU time is what a step costs however busy the machine is, so this figure can be taken while other
work runs, where ``run.py``'s wall-clock medians cannot; it leaves out what a second thread would gain.
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness.implementations import DynajitImpl, EagerImpl, Implementation, LogCollector, TorchCompileImpl  # noqa: E402
from harness.real_models import real_models  # noqa: E402

DEFAULT_MODELS = "llama-train,bert-train,vit-train,resnet10-train"


def cpu_per_step(run, fn, steps: int) -> float:
    """Seconds of this process's CPU time per call of ``run(fn)``, over ``steps`` calls."""
    start = time.process_time()
    for _ in range(steps):
        run(fn)
    return (time.process_time() - start) / steps


def measure(name: str, impls: list[Implementation], steps: int, rounds: int) -> dict[str, float]:
    """Each implementation's least CPU time per step over ``rounds`` alternating rounds."""
    case = {w.name: w for w in real_models()}[name].build()
    fns = {}
    for impl in impls:
        fns[impl.name] = impl.wrap(case.target)
        for _ in range(10):  # compile, then reach the steady state
            case.run(fns[impl.name])
    best = {impl.name: float("inf") for impl in impls}
    for _ in range(rounds):
        for impl in impls:
            best[impl.name] = min(best[impl.name], cpu_per_step(case.run, fns[impl.name], steps))
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=DEFAULT_MODELS, help="comma-separated zoo model names")
    parser.add_argument("--steps", type=int, default=1500, help="steps timed per implementation per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the least time is kept")
    args = parser.parse_args(argv)
    logs = LogCollector()
    logs.install()
    impls: list[Implementation] = [EagerImpl("eager"), TorchCompileImpl(), DynajitImpl("inductor", logs)]
    print("CPU ms per step, one thread (speedup over eager)")
    print("| model | " + " | ".join(impl.name for impl in impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        best = measure(name, impls, args.steps, args.rounds)
        eager = best["eager"]
        cells = [f"{best[i.name] * 1e3:.3f} ({eager / best[i.name]:.2f}x)" for i in impls]
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
