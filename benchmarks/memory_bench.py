"""Peak memory of one inference call: eager vs dynajit (and optionally torch.compile) on real models.

Run: ``python benchmarks/memory_bench.py [--only mobilenet_v3_small,t5-default] [--torch-compile]``.
Prints, per zoo model, the most bytes the CPU allocator held above its starting level during one
call (``harness.timing.peak_bytes``) for each implementation and its ratio to eager. Memory is
deterministic, so one call per implementation is enough even on a loaded machine.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from harness.implementations import DynajitImpl, EagerImpl, Implementation, LogCollector, TorchCompileImpl  # noqa: E402
from harness.real_models import real_models  # noqa: E402
from harness.report import model_row  # noqa: E402
from harness.timing import peak_bytes  # noqa: E402
from harness.workloads import Case  # noqa: E402

DEFAULT_MODELS = (
    "mobilenet_v3_small,mobilenet_v2,efficientnet_b0,regnet_y_400mf,squeezenet1_1,resnet18,"
    "swin,vit,bert-default,t5-default,whisper-default,gpt2-default"
)


def measure(names: list[str], impls: list[Implementation]) -> list[tuple[str, dict[str, int | str]]]:
    """Per model, each implementation's peak bytes over one call (or why it could not run)."""
    by_name = {w.name: w for w in real_models()}
    rows = []
    for name in names:
        workload = by_name[name]
        reason = workload.unavailable()
        if reason:
            rows.append((name, {impl.name: reason for impl in impls}))
            continue
        case = workload.build()
        peaks = {impl.name: _peak(impl, case) for impl in impls}
        rows.append((name, peaks))
        print(_row(name, peaks, impls), flush=True)
    return rows


def _peak(impl: Implementation, case: Case) -> int | str:
    """Peak bytes of one call of ``case`` with ``impl`` once compiled and warm, or the error that stopped it."""
    try:
        fn = impl.wrap(case.target)
        for _ in range(5):  # compile, and reach the steady state the benchmark measures after timing
            case.run(fn)
        return peak_bytes(lambda: case.run(fn))
    except Exception as exc:
        lines = str(exc).splitlines()
        return f"{type(exc).__name__}: {lines[0] if lines else ''}"
    finally:
        impl.reset()


def _row(name: str, peaks: dict[str, int | str], impls: list[Implementation]) -> str:
    def against(value: int, eager: int) -> str:
        over = f", +{value - eager} B over eager" if value > eager else ""
        return f"{value / 2**20:.3f} ({value / eager:.2f}x{over})"

    return model_row(name, peaks, [impl.name for impl in impls], lambda value: f"{value / 2**20:.3f}", against)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=DEFAULT_MODELS, help="comma-separated zoo model names")
    parser.add_argument("--backend", default="inductor", help="dynajit backend to measure")
    parser.add_argument("--torch-compile", action="store_true", help="measure torch.compile too")
    args = parser.parse_args(argv)
    logs = LogCollector()
    logs.install()
    impls: list[Implementation] = [EagerImpl("eager"), DynajitImpl(args.backend, logs)]
    if args.torch_compile:
        impls.append(TorchCompileImpl())
    print("peak MB of one call (ratio to eager)")
    print("| model | " + " | ".join(impl.name for impl in impls) + " |")
    print("|---" * (len(impls) + 1) + "|")
    measure([name.strip() for name in args.only.split(",") if name.strip()], impls)


if __name__ == "__main__":
    main()
