"""The real-model part of the reports: one table per group (CNN inference, transformer inference, training),
a geometric mean per group and compiler, and the reliability of the figures (noise floor, machine load).

Shared by ``latest.md`` and the README blocks; the small programs' table stays in :mod:`harness.report`.
"""

from __future__ import annotations

import math
from typing import Any

from harness.noise import NOISY_FLOOR, machine_verdict, within_noise

__all__ = [
    "GROUP_TITLES",
    "abbreviation",
    "compilers_of",
    "group_means",
    "group_summary",
    "model_tables",
    "noise_cell",
    "reliability_lines",
    "speedup_text",
]

GROUP_TITLES = {
    "cnn": "CNN inference",
    "transformer": "Transformer inference",
    "training": "Training (forward, loss, backward)",
    "generate": "Generation (greedy decoding)",
}
DASH = "—"
EAGER_NAMES = ("eager", "eager (again)")


def abbreviation(compiler: str) -> str:
    """A short column prefix: ``TC`` for torch.compile, ``DJ`` for dynajit's default backend, ``DJ-<backend>``."""
    if compiler == "torch.compile":
        return "TC"
    if compiler.startswith("dynajit["):
        backend = compiler[len("dynajit[") : -1]
        return "DJ" if backend == "inductor" else f"DJ-{backend}"
    return compiler


def compilers_of(results: dict[str, Any]) -> list[str]:
    return [name for name in results["implementations"] if name not in EAGER_NAMES]


def _cell(text: str, limit: int = 110) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _floor(workload: dict[str, Any]) -> float:
    value = workload.get("noise_floor_pct")
    return math.inf if value is None else value / 100


def noise_cell(workload: dict[str, Any]) -> str:
    """The noise floor as a percentage, flagged when it makes the workload's figures unreliable."""
    floor = _floor(workload)
    if not math.isfinite(floor):
        return "unknown (unreliable)"
    return f"{floor:.0%} (unreliable)" if not workload.get("reliable", True) else f"{floor:.1%}"


def speedup_text(rec: dict[str, Any], workload: dict[str, Any]) -> str:
    """``1.23x``; ``~1.02x`` within the noise floor; ``1.23x?`` when the workload's figures are unreliable."""
    speedup = rec["speedup"]
    text = f"{speedup:.2f}x"
    if not workload.get("reliable", True):
        return text + "?"
    return f"~{text}" if within_noise(speedup, _floor(workload)) else text


def _ran_ok(rec: dict[str, Any]) -> bool:
    return "speedup" in rec and rec.get("correct") == "ok" and not rec.get("error")


def _status(rec: dict[str, Any]) -> str:
    if not rec:
        return "not run"
    if rec.get("error"):
        return rec["error"]
    correct = rec.get("correct", "")
    return "ok" if correct == "ok" else correct or "not checked"


def _mb(nbytes: int | None) -> str:
    if nbytes is None:
        return DASH
    megabytes = nbytes / 2**20
    return f"{megabytes:.1f}" if megabytes >= 10 else f"{megabytes:.2f}"  # small models' steps need well under 1 MB


def _memory(rec: dict[str, Any], eager: dict[str, Any]) -> str:
    if rec.get("peak_bytes") is None:
        return DASH
    base = eager.get("peak_bytes")
    ratio = f" ({rec['peak_bytes'] / base:.2f}x)" if base else ""
    return _mb(rec["peak_bytes"]) + ratio


def _models(results: dict[str, Any], group: str) -> list[dict[str, Any]]:
    return [w for w in results["workloads"] if w.get("group") == group]


def group_means(results: dict[str, Any]) -> dict[str, dict[str, tuple[float | None, int, int, int]]]:
    """Per group, per compiler: (geometric mean speedup over the models it ran correctly, how many those were,
    how many models of the group were measured, how many of those were unreliable)."""
    means: dict[str, dict[str, tuple[float | None, int, int, int]]] = {}
    for group in GROUP_TITLES:
        measured = [w for w in _models(results, group) if w.get("status") == "ok"]
        if not measured:
            continue
        means[group] = {}
        for name in compilers_of(results):
            done = [w for w in measured if _ran_ok(w["impls"].get(name, {}))]
            speedups = [w["impls"][name]["speedup"] for w in done]
            mean = math.exp(sum(map(math.log, speedups)) / len(speedups)) if speedups else None
            noisy = sum(not w.get("reliable", True) for w in done)
            means[group][name] = (mean, len(done), len(measured), noisy)
    return means


def _mean_cell(mean: float | None, done: int, total: int, noisy: int) -> str:
    if mean is None:
        return f"none correct (0/{total})"
    flag = f", {noisy} unreliable" if noisy else ""
    return f"**{mean:.2f}x** ({done}/{total} correct{flag})"


def group_summary(results: dict[str, Any]) -> list[str]:
    """A table: one row per group, one column per compiler, the geometric mean and how many models ran correctly."""
    means = group_means(results)
    if not means:
        return []
    compilers = compilers_of(results)
    lines = [
        "| real models | " + " | ".join(f"{name} geomean speedup" for name in compilers) + " |",
        "|---" * (1 + len(compilers)) + "|",
    ]
    for group, per_compiler in means.items():
        cells = [_mean_cell(*per_compiler[name]) for name in compilers]
        lines.append(f"| {GROUP_TITLES[group]} | " + " | ".join(cells) + " |")
    return lines


def _model_row(workload: dict[str, Any], compilers: list[str]) -> str:
    if workload.get("status") != "ok":
        reason = _cell(workload.get("skip_reason", "not run"))
        return f"| {workload['name']} | skipped: {reason} |" + " |" * (2 + 5 * len(compilers))
    impls = workload["impls"]
    eager = impls.get("eager", {})
    cells = [
        workload["name"],
        f"{eager['median_s'] * 1e3:.2f}" if "median_s" in eager else _cell(_status(eager)),
        noise_cell(workload),
        _mb(eager.get("peak_bytes")),
    ]
    for name in compilers:
        rec = impls.get(name, {})
        cells += [
            _cell(_status(rec)),
            speedup_text(rec, workload) if _ran_ok(rec) else DASH,
            f"{rec['graphs']} / {rec.get('breaks', DASH)}" if rec.get("graphs") is not None else DASH,
            f"{rec['cold_compile_s']:.1f}" if rec.get("cold_compile_s") is not None else DASH,
            _memory(rec, eager),
        ]
    return "| " + " | ".join(cells) + " |"


def model_tables(results: dict[str, Any]) -> list[str]:
    """Per group: a heading, the table of its models (every compiler's columns side by side) and its geomean row."""
    compilers = compilers_of(results)
    means = group_means(results)
    header = "| model | eager (ms) | noise floor | eager peak MB | " + " | ".join(
        f"{short} correct | {short} speedup | {short} graphs / breaks | {short} cold compile (s) "
        f"| {short} peak MB (vs eager)"
        for short in map(abbreviation, compilers)
    )
    legend = ", ".join(f"{abbreviation(name)} = {name}" for name in compilers)
    lines: list[str] = []
    for group, title in GROUP_TITLES.items():
        models = _models(results, group)
        if not models:
            continue
        lines += ["", f"### {title}", "", f"{legend}.", "", header + " |", "|---" * (4 + 5 * len(compilers)) + "|"]
        lines += [_model_row(workload, compilers) for workload in models]
        if group in means:
            cells = ["**geomean**", "", "", ""]
            for name in compilers:
                mean, done, total, noisy = means[group][name]
                flag = f" ({noisy} unreliable)" if noisy else ""
                cells += [f"{done}/{total} ok", f"**{mean:.2f}x**{flag}" if mean else DASH, "", "", ""]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def reliability_lines(results: dict[str, Any]) -> list[str]:
    """What makes this run's figures unreliable, if anything: machine load and workloads above the noise floor."""
    load = results.get("load_average") or {}
    cores = results["machine"].get("cores_usable", 1)
    verdict = machine_verdict([load.get("start") or (), load.get("end") or ()], cores)
    measured = [w for w in results["workloads"] if w.get("status") == "ok"]
    noisy = [w["name"] for w in measured if not w.get("reliable", True)]
    lines = []
    if not verdict.reliable:
        lines.append(
            f"- **Figures unreliable**: {verdict.reasons[0]}. Speedups are paired per round, "
            "which cancels load that hits both sides alike, but not load that comes and goes within a round."
        )
    if noisy:
        lines.append(
            f"- **{len(noisy)} of {len(measured)} workloads were too noisy to measure** (eager's samples spread more "
            f"than {NOISY_FLOOR:.0%}: (p90-p10)/median); their speedups carry a `?`: {', '.join(noisy)}."
        )
    if not lines:
        lines.append(
            f"- Machine quiet enough: load average at most 1.5 per core and every noise floor under {NOISY_FLOOR:.0%}."
        )
    return lines
