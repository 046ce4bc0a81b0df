"""dynajit's cold compile of real models as ``run.py`` measures it, with where the time went.

Run: ``python benchmarks/cold_bench.py [--only a,b] [--after MODEL] [--rounds R]``. Each model is compiled with
empty caches (as ``run.py``'s cold compile: the first call with on-disk caches in a fresh folder) after the
process has compiled ``--after`` once (default ``gpt2-default``), since ``run.py`` compiles its models one after
another in one process and the first compile of a process also pays for imports and torch's own warm-up. It
prints the first call's wall time, the garbage collector's time inside it (all generations, and the oldest
alone: a collection of the whole heap), and the wall time of the compile's phases: capture's trace, guard
building and compiling, AOT autograd (which contains inductor-lite's compile) and inductor-lite's compile.
The phases nest, so they do not add up to the total. ``--rounds`` repeats each model in a fresh process.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import json
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# (module, attribute path) of each phase timed
PHASES = {
    "trace": ("dynajit.capture._symbolic.tracer", "RootTracer.run"),
    "guards built": ("dynajit.capture._symbolic.guarding", "build_guards"),
    "guards compiled": ("dynajit.guards._compile", "CompiledGuards.__init__"),
    "aot autograd": ("torch._functorch.aot_autograd", "aot_module_simplified"),
    "inductor-lite": ("dynajit.inductor_lite._compile", "compile_graph"),
}


def _timed(times: dict[str, float], phase: str, module_name: str, path: str) -> None:
    module = importlib.import_module(module_name)
    owner_name, _, name = path.rpartition(".")
    owner = getattr(module, owner_name) if owner_name else module
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            times[phase] = times.get(phase, 0.0) + time.perf_counter() - start

    setattr(owner, name, timed)
    for other in list(sys.modules.values()):  # names imported from the module elsewhere
        if getattr(other, "__name__", "").startswith("dynajit") and getattr(other, name, None) is original:
            setattr(other, name, timed)


def measure(name: str, after: str) -> dict[str, Any]:
    """One model's cold compile in this process, after compiling ``after`` once."""
    import dynajit.compiler
    import dynajit.inductor_lite  # noqa: F401
    from harness.implementations import DynajitImpl, LogCollector
    from harness.real_models import real_models
    from harness.timing import timed_call

    times: dict[str, float] = {}
    for phase, (module_name, path) in PHASES.items():
        _timed(times, phase, module_name, path)
    logs = LogCollector()
    logs.install()
    impl = DynajitImpl("inductor", logs)
    zoo = {w.name: w for w in real_models()}
    warm = zoo[after].build()
    impl.start_cold(tempfile.mkdtemp())
    warm_fn = impl.wrap(warm.target)
    warm.run(warm_fn)
    impl.reset()
    case = zoo[name].build()
    case.run(case.target)  # eager first, as run.py runs it
    collected = {"all": 0.0, "oldest": 0.0}
    started: list[float] = []

    def note(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
            return
        spent = time.perf_counter() - started.pop()
        collected["all"] += spent
        if info["generation"] == 2:
            collected["oldest"] += spent

    impl.start_cold(tempfile.mkdtemp())
    fn = impl.wrap(case.target)
    times.clear()
    gc.collect()  # as run.py: from a collected heap
    gc.callbacks.append(note)
    try:
        total, _ = timed_call(lambda: case.run(fn))  # as run.py times its cold compile
    finally:
        gc.callbacks.remove(note)
    return {"model": name, "cold": total, "gc": collected["all"], "gc oldest": collected["oldest"], **times}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="mobilenet_v2,t5-default,llama-train", help="comma-separated zoo models")
    parser.add_argument("--after", default="gpt2-default", help="the model compiled first, to warm the process")
    parser.add_argument("--rounds", type=int, default=1, help="fresh processes per model")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child process: measure this model, print JSON
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one, args.after)))
        return
    columns = ["cold", "gc", "gc oldest", *PHASES]
    print("| model | " + " | ".join(f"{c} (s)" for c in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name in [n.strip() for n in args.only.split(",") if n.strip()]:
        for _ in range(args.rounds):
            out = subprocess.run(
                [sys.executable, __file__, "--one", name, "--after", args.after],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            row = json.loads(out.strip().splitlines()[-1])
            print(f"| {name} | " + " | ".join(f"{row.get(c, 0.0):.2f}" for c in columns) + " |", flush=True)


if __name__ == "__main__":
    main()
