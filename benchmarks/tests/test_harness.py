"""The harness's own checks: failures become table cells, timing and memory figures are sane, reports render."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import warnings

import pytest
import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from harness import report
from harness.implementations import CountingBackend, Implementation
from harness.runner import EAGER, EAGER_AGAIN, Settings, bench_workload, compare
from harness.timing import interleaved, peak_bytes, time_limit
from harness.workloads import Case, Workload

TINY = Settings(sample_seconds=0.0005, budget_seconds=0.05, min_rounds=3, max_rounds=5, compile_limit_seconds=30)


class FxTraced(Implementation):
    """Compiles by tracing with torch.fx and running the traced graph through a counting backend."""

    compiles = True

    def __init__(self) -> None:
        super().__init__("fx")
        self.counter: CountingBackend | None = None

    def wrap(self, target):
        self.counter = CountingBackend(lambda gm, inputs: gm.forward)
        gm = torch.fx.symbolic_trace(target)
        return self.counter(gm, [])


class Broken(Implementation):
    compiles = True

    def wrap(self, target):
        raise NotImplementedError("capture of this opcode is missing\nsecond line")


class WrongAnswer(Implementation):
    compiles = True

    def wrap(self, target):
        return lambda *args: target(*args) + 1


class GoesStale(Implementation):
    """Right for the first calls (the compile checks), wrong afterwards, like a cache entry a guard should drop."""

    compiles = True

    def wrap(self, target):
        calls = {"n": 0}

        def stale(*args):
            calls["n"] += 1
            return target(*args) + (1 if calls["n"] > 1 else 0)

        return stale


def _workload() -> Workload:
    def fn(x, y):
        return torch.relu(x) * y

    def build() -> Case:
        x, y = torch.randn(64), torch.randn(64)
        return Case(fn, lambda f: f(x, y), inputs=(x, y))

    return Workload("relu_mul", "relu then multiply", build)


def test_failures_become_cells_and_the_rest_is_timed():
    impls = [FxTraced(), Broken("broken"), WrongAnswer("wrong"), GoesStale("stale")]
    result = bench_workload(_workload(), impls, TINY, log=lambda message: None)
    impls = result["impls"]
    assert impls["stale"]["correct"].startswith("after timing: MISMATCH")
    assert impls["broken"]["error"] == "failed at cold compile: NotImplementedError: capture of this opcode is missing"
    assert "median_s" not in impls["broken"]
    assert impls["wrong"]["correct"].startswith("MISMATCH")
    assert impls["fx"]["correct"] == "ok"
    for name in (EAGER, EAGER_AGAIN, "fx", "wrong"):
        record = impls[name]
        assert 0 < record["min_s"] <= record["median_s"] <= record["max_s"]
        assert record["samples"] >= TINY.min_rounds
    assert impls[EAGER]["speedup"] == 1.0
    assert result["noise_floor_pct"] >= 0
    assert impls["fx"]["cold_compile_s"] > 0 and impls["fx"]["warm_compile_s"] > 0


class WarnsEager(Implementation):
    """Right answers, but its compiled code said it runs a graph eagerly (as inductor-lite does after a failed
    kernel build)."""

    compiles = True

    def wrap(self, target):
        def degraded(*args):
            message = "build failed\ninductor-lite: this graph runs its aten ops eagerly instead"
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            return target(*args)

        return degraded


def test_a_dynajit_frame_that_falls_back_is_a_failure_with_its_reason_never_a_speedup():
    from dynajit._dynamo import register_backend
    from harness.implementations import DynajitImpl, LogCollector

    def bench_test_broken(gm, example_inputs):
        raise ValueError("no kernel for batch_norm")

    register_backend(bench_test_broken)
    impls = [DynajitImpl("bench_test_broken", LogCollector()), WarnsEager("warns")]
    result = bench_workload(_workload(), impls, TINY, log=lambda message: None)
    broken = result["impls"]["dynajit[bench_test_broken]"]
    assert broken["error"] == "failed at cold compile: ran eagerly: ValueError: no kernel for batch_norm"
    assert "speedup" not in broken and "graphs" not in broken
    warned = result["impls"]["warns"]
    assert warned["error"].startswith("failed at cold compile: FellBack: inductor-lite: this graph runs its aten ops")
    assert "speedup" not in warned
    table = "\n".join(
        report.summary_table({"implementations": [EAGER, EAGER_AGAIN, *result["impls"]], "workloads": [result]})
    )
    assert "ran eagerly: ValueError: no kernel for batch_norm" in table and "graphs," not in table


def test_unavailable_workload_is_skipped_with_its_reason():
    workload = _workload()
    workload.unavailable = lambda: "torchvision not installed"
    result = bench_workload(workload, [FxTraced()], TINY, log=lambda message: None)
    assert result == {
        "name": "relu_mul",
        "description": "relu then multiply",
        "group": "",
        "impls": {},
        "status": "skipped",
        "skip_reason": "torchvision not installed",
    }


def test_compare_checks_values_shapes_and_counts():
    case = Case(lambda: None, lambda f: None)
    assert compare((torch.ones(2), 3), (torch.ones(2), 3), case) == "ok"
    assert compare(torch.ones(2), torch.ones(3), case).startswith("MISMATCH: output 0")
    assert compare(torch.ones(2, dtype=torch.float64), torch.ones(2), case).startswith("MISMATCH")
    assert compare((torch.ones(2),), (torch.ones(2), torch.ones(2)), case) == "MISMATCH: 1 outputs, eager has 2"


def test_interleaved_drops_a_step_that_raises():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] > 2:
            raise RuntimeError("guard failed")

    stats, errors = interleaved(
        {"ok": lambda: None, "flaky": flaky}, 1, budget_seconds=0.01, min_rounds=4, max_rounds=4
    )
    assert stats["ok"].samples == 4
    assert "flaky" not in stats
    assert errors["flaky"] == "failed while timing: RuntimeError: guard failed"


def test_a_frame_that_falls_back_while_timing_is_described_by_its_cause():
    import functools

    from harness.runner import describe_error

    class StrictModeError(RuntimeError):
        pass

    def falls_back():
        try:
            raise ValueError("no kernel for batch_norm")
        except ValueError as cause:
            raise StrictModeError("dynajit (strict mode): function '__resume_at_644_15' ran eagerly") from cause

    _, errors = interleaved(
        {"ok": lambda: None, "strict": falls_back},
        1,
        budget_seconds=0.01,
        min_rounds=3,
        max_rounds=3,
        describe=functools.partial(describe_error, stage="timing"),
    )
    assert errors["strict"] == "failed at timing: ran eagerly: ValueError: no kernel for batch_norm"


def test_peak_bytes_counts_live_temporaries():
    x = torch.randn(1 << 16)  # 256 KiB

    def two_live_temporaries():
        a = x * 2
        b = a + 1
        return b

    peak = peak_bytes(two_live_temporaries)
    assert 2 * x.nbytes <= peak < 2 * x.nbytes + 1024  # plus the two scalars wrapped as 0-d tensors


def test_peak_bytes_is_the_steady_state_not_the_first_profiled_call():
    x, calls = torch.randn(1 << 16), []

    def warms_up_once():
        calls.append(torch.empty(1 << 20) if not calls else None)  # 4 MiB set up at the first call only
        return x * 2

    assert peak_bytes(warms_up_once) < 2 * x.nbytes and len(calls) == 4


def test_time_limit_interrupts_python_code():
    with pytest.raises(TimeoutError, match="spin took more than"), time_limit(0.05, "spin"):
        while True:
            pass


def test_reports_render(tmp_path):
    result = bench_workload(_workload(), [FxTraced(), Broken("broken")], TINY, log=lambda message: None)
    results = {
        "date": "2026-01-01 00:00 UTC",
        "mode": "quick",
        "command": "python benchmarks/run.py --quick",
        "machine": {
            "cpu": "test cpu",
            "cores_usable": 2,
            "os": "Linux",
            "python": "3.11",
            "torch": torch.__version__,
            "torch_threads": 2,
            "libc": "glibc 2.36",
            "env": {"OMP_NUM_THREADS": "2"},
        },
        "settings": {},
        "implementations": [EAGER, EAGER_AGAIN, "fx", "broken"],
        "startup": {"fx": "0.01s"},
        "workloads": [result, {"name": "resnet18", "status": "skipped", "skip_reason": "not installed", "impls": {}}],
        "extra": {},
        "notes": [],
        "total_seconds": 1.0,
    }
    report.write_markdown(results, tmp_path / "latest.md")
    report.write_json(results, tmp_path / "latest.json")
    text = (tmp_path / "latest.md").read_text()
    assert "| relu_mul | broken | failed at cold compile: NotImplementedError" in text
    assert "- resnet18: not installed" in text
    means = report.geometric_means(results)
    assert set(means) == {"fx"} and means["fx"][1:] == (1, 1)  # broken ran nothing; skipped workloads don't count
    assert "Geometric mean speedup over eager" in text
    assert json.loads((tmp_path / "latest.json").read_text())["workloads"][0]["name"] == "relu_mul"
    pytest.importorskip("matplotlib")
    assert report.write_chart(results, tmp_path / "speedups.png") is None
    assert (tmp_path / "speedups.png").read_bytes()[:4] == b"\x89PNG"


def test_probe_names_a_missing_or_broken_package():
    from harness.real_models import _probe

    assert _probe("json", lambda: None) is None
    assert _probe("no_such_package_here", lambda: None).startswith("no_such_package_here not installed")

    def mismatched_forward():
        raise RuntimeError("operator torchvision::nms does not exist\nmore")

    reason = _probe("json", mismatched_forward)
    assert reason.startswith("json ") and reason.endswith(
        "does not run with torch " + torch.__version__ + ": RuntimeError: operator torchvision::nms does not exist"
    )


BENCHMARKS = pathlib.Path(__file__).resolve().parents[1]


def _run_python(code_or_args: list[str], env_drop: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in env_drop}
    return subprocess.run([sys.executable, *code_or_args], capture_output=True, text=True, env=env, timeout=120)


def test_bench_env_is_set_by_re_executing():
    code = (
        f"import sys; sys.path.insert(0, {str(BENCHMARKS)!r}); "
        "from harness.environment import ensure_bench_env; ensure_bench_env(); "
        "import os; print(os.environ['MALLOC_MMAP_THRESHOLD_'], os.environ['OMP_NUM_THREADS'])"
    )
    done = _run_python(["-c", code], env_drop=("MALLOC_MMAP_THRESHOLD_", "OMP_NUM_THREADS", "DYNAJIT_BENCH_REEXEC"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1073741824", "2"]


def test_demo_exits_non_zero_with_the_reason_when_it_cannot_compile():
    done = _run_python([str(BENCHMARKS / "demo.py"), "--backend", "no_such_backend"])
    assert done.returncode == 1
    assert "backend 'no_such_backend' is not available" in done.stdout
    assert "unknown backend 'no_such_backend'" in done.stdout
    assert "No speed figures" in done.stdout


def test_workload_selection_by_mode_and_name():
    import run

    quick, notes = run.select_workloads("", quick=True)
    full, _ = run.select_workloads("", quick=False)
    models = {w.name for w in full} - {w.name for w in quick}
    groups = [w.group for w in full if w.name in models]
    assert groups[:3] == ["cnn", "transformer", "training"]  # every group early: a run cut short covers all
    assert {"resnet18", "bert-default", "resnet10-train"} <= models and "llama-generate" not in models
    assert {w.group for w in full if w.name in models} == {"cnn", "transformer", "training"}
    assert "real models left out of --quick runs" in notes[0] and "resnet18" in notes[0]
    assert [w.name for w in run.select_workloads("gpt2-generate", quick=False)[0]] == ["gpt2-generate"]
    with_generate, _ = run.select_workloads("", quick=False, generate=True)
    assert "llama-generate" in {w.name for w in with_generate}
    assert [w.name for w in run.select_workloads("softmax, tiny_call", quick=True)[0]] == ["softmax", "tiny_call"]
    with pytest.raises(SystemExit, match=r"unknown workload\(s\) \['softmaxx'\]"):
        run.select_workloads("softmaxx", quick=False)


def test_each_workloads_cold_compile_starts_from_empty_caches(tmp_path):
    # Without it, a workload compiled after another of the same code found its kernels built: the second
    # "cold" compile was a warm one.
    pytest.importorskip("dynajit.inductor_lite")
    from dynajit.inductor_lite import cache_stats, config
    from harness.implementations import DynajitImpl, LogCollector

    def scaled_tanh(x):
        return torch.tanh(x) * 3 + 1

    x = torch.randn(64)
    workload = Workload("scaled_tanh", "tanh, mul, add", lambda: Case(scaled_tanh, lambda f: f(x), inputs=(x,)))
    settings = Settings(**{**vars(TINY), "cold_cache_root": str(tmp_path)})
    with config.patch(cache_dir=str(tmp_path / "first")):
        impl = DynajitImpl("inductor", LogCollector())
        bench_workload(workload, [impl], settings, log=lambda _: None)
        built = cache_stats()["builds"]
        bench_workload(workload, [impl], settings, log=lambda _: None)
        assert cache_stats()["builds"] > built, cache_stats()  # built again, in a new empty folder
        assert str(tmp_path) in config.cache_dir
