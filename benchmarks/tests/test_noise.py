"""The noise floor and the reliability verdicts, as pure functions over sample lists and load averages."""

from __future__ import annotations

import math
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from harness.model_report import group_means, model_tables, reliability_lines, speedup_text
from harness.noise import (
    machine_verdict,
    noise_floor,
    relative_spread,
    within_noise,
    workload_verdict,
)


def test_spread_is_zero_only_when_samples_agree():
    assert relative_spread([0.010] * 8) == 0.0
    assert relative_spread([0.010, 0.0101, 0.0099, 0.010, 0.010]) > 0


def test_a_sevenfold_spread_is_a_large_floor_and_unreliable():
    # the demo's eager samples: a median of 172 ms with a minimum of 24 ms
    samples = [0.024, 0.030, 0.150, 0.172, 0.172, 0.180, 0.190, 0.200, 0.172, 0.165]
    floor = noise_floor(samples[:5], samples[5:])
    assert floor > 0.5
    verdict = workload_verdict(floor)
    assert not verdict.reliable and "above 10%" in verdict.describe()


def test_spread_ignores_a_rare_outlier_but_not_a_frequent_one():
    # deciles: one sample in twenty off is not the run's noise; three in twenty (or one in five) are
    assert relative_spread([*[1.0] * 19, 7.0]) == 0.0
    assert relative_spread([*[1.0] * 17, 7.0, 7.0, 7.0]) > 1.0
    assert relative_spread([*[1.0] * 4, 7.0]) > 1.0


def test_floor_pools_repeated_measurements():
    # each repetition alone is steady, but the two disagree: the pooled spread shows it
    assert noise_floor([1.0] * 5) == 0.0
    assert noise_floor([1.0] * 5, [1.3] * 5) == pytest.approx(0.3 / 1.15, rel=1e-6)


def test_too_few_samples_give_no_floor_and_no_trust():
    assert relative_spread([1.0, 1.1]) == math.inf
    assert relative_spread([]) == math.inf
    assert relative_spread([0.0, 0.0, 0.0]) == math.inf
    assert not workload_verdict(math.inf).reliable
    assert within_noise(5.0, math.inf)


def test_quiet_workload_is_reliable():
    assert workload_verdict(0.03).reliable
    assert workload_verdict(0.10).reliable and not workload_verdict(0.1001).reliable


def test_within_noise_is_symmetric_on_a_log_scale():
    assert within_noise(1.04, 0.05) and within_noise(1 / 1.04, 0.05)
    assert not within_noise(1.06, 0.05) and not within_noise(0.94, 0.05)


def test_machine_verdict_by_load_per_core():
    assert machine_verdict([(1.9, 2.0, 2.0), (2.5, 2.0, 2.0)], cores=2).reliable
    busy = machine_verdict([(1.0, 1.0, 1.0), (12.7, 13.1, 11.6)], cores=2)
    assert not busy.reliable and "12.7" in busy.reasons[0] and "under load" in busy.reasons[0]
    assert machine_verdict([(), ()], cores=2).reliable  # unknown load is not invented


def _results(workloads):
    return {
        "implementations": ["eager", "eager (again)", "torch.compile", "dynajit[inductor]"],
        "machine": {"cores_usable": 2},
        "load_average": {"start": (9.0, 9.0, 9.0), "end": (1.0, 1.0, 1.0)},
        "workloads": workloads,
    }


def _model(name, group, speedups, floor_pct=2.0, reliable=True, error=None):
    impls = {"eager": {"median_s": 0.01, "peak_bytes": 2**20, "correct": "ok"}}
    for compiler, speedup in speedups.items():
        impls[compiler] = {"correct": "ok", "speedup": speedup, "graphs": 1, "breaks": 0, "cold_compile_s": 1.0}
        impls[compiler]["peak_bytes"] = 2**19
    if error:
        impls["dynajit[inductor]"] = {"error": error, "cold_compile_s": 0.5}
    return {
        "name": name,
        "group": group,
        "status": "ok",
        "noise_floor_pct": floor_pct,
        "reliable": reliable,
        "impls": impls,
    }


def test_group_means_count_only_correct_models_and_show_failures_with_their_reason():
    results = _results(
        [
            _model("resnet18", "cnn", {"torch.compile": 2.0, "dynajit[inductor]": 1.0}),
            _model("densenet", "cnn", {"torch.compile": 0.5}, error="failed at cold compile: ran eagerly: KeyError"),
            _model("bert", "transformer", {"torch.compile": 1.5, "dynajit[inductor]": 1.2}, 40.0, reliable=False),
        ]
    )
    means = group_means(results)
    assert means["cnn"]["torch.compile"] == (pytest.approx(1.0), 2, 2, 0)
    assert means["cnn"]["dynajit[inductor]"] == (pytest.approx(1.0), 1, 2, 0)
    assert means["transformer"]["dynajit[inductor]"][3] == 1
    table = "\n".join(model_tables(results))
    assert "### CNN inference" in table and "### Transformer inference" in table
    assert "TC = torch.compile, DJ = dynajit[inductor]" in table and "| DJ cold compile (s) |" in table
    assert "failed at cold compile: ran eagerly: KeyError" in table
    assert "| 0.50 (0.50x) |" in table  # peak MB and its ratio to eager's
    assert "1.20x?" in table and "40% (unreliable)" in table
    lines = " ".join(reliability_lines(results))
    assert "Figures unreliable" in lines and "under load" in lines and "1 of 3 workloads were too noisy" in lines


def test_speedup_marks():
    quiet = {"noise_floor_pct": 5.0, "reliable": True}
    assert speedup_text({"speedup": 1.5}, quiet) == "1.50x"
    assert speedup_text({"speedup": 1.03}, quiet) == "~1.03x"
    assert speedup_text({"speedup": 1.5}, {"noise_floor_pct": 50.0, "reliable": False}) == "1.50x?"
