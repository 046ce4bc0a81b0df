"""The reports: a Markdown table, the JSON of every figure, and a PNG bar chart of speedups."""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any

from harness.model_report import group_summary, model_tables, noise_cell, reliability_lines, speedup_text

__all__ = [
    "geometric_means",
    "headline",
    "model_row",
    "summary_table",
    "update_readme",
    "write_chart",
    "write_json",
    "write_markdown",
]

OVERHEAD_WORKLOAD = "tiny_call"
NOT_APPLICABLE = "—"


def model_row(name: str, values: dict[str, Any], order: list[str], plain: Any, against: Any) -> str:
    """One Markdown row of a per-model table: each implementation's figure, ``plain(value)`` for eager's (or
    when eager has none), ``against(value, eager)`` for the others, an error message cut to 40 characters."""
    eager = values.get("eager")
    cells = []
    for key in order:
        value = values[key]
        if isinstance(value, str):
            cells.append(value[:40])
        elif key == "eager" or isinstance(eager, str) or not eager:
            cells.append(plain(value))
        else:
            cells.append(against(value, eager))
    return f"| {name} | " + " | ".join(cells) + " |"


def _ms(seconds: float | None) -> str:
    return NOT_APPLICABLE if seconds is None else f"{seconds * 1e3:.3f}"


def _s(seconds: float | None) -> str:
    return NOT_APPLICABLE if seconds is None else f"{seconds:.2f}"


def _mb(nbytes: int | None) -> str:
    return NOT_APPLICABLE if nbytes is None else f"{nbytes / 2**20:.1f}"


def _count(value: int | None) -> str:
    return NOT_APPLICABLE if value is None else str(value)


def _load(results: dict[str, Any], when: str) -> str:
    values = (results.get("load_average") or {}).get(when)
    return " / ".join(f"{value:.2f}" for value in values) if values else "unknown"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _result_rows(workload: dict[str, Any]) -> list[str]:
    rows = []
    for name, rec in workload["impls"].items():
        status = rec.get("error") or rec.get("correct", "")
        if rec.get("error") and rec.get("correct"):
            status = f"{rec['correct']}; {rec['error']}"
        spread = f"{_ms(rec['min_s'])}-{_ms(rec['max_s'])}" if "min_s" in rec else NOT_APPLICABLE
        speedup = speedup_text(rec, workload) if "speedup" in rec else NOT_APPLICABLE
        rows.append(
            f"| {workload['name']} | {name} | {_cell(status)} | {_s(rec.get('cold_compile_s'))} "
            f"| {_s(rec.get('warm_compile_s'))} | {_ms(rec.get('median_s'))} | {spread} | {speedup} "
            f"| {_count(rec.get('graphs'))} | {_count(rec.get('ops'))} | {_count(rec.get('breaks'))} "
            f"| {_mb(rec.get('peak_bytes'))} |"
        )
    return rows


def _noise_rows(workloads: list[dict[str, Any]]) -> list[str]:
    rows = []
    for workload in workloads:
        eager, again = workload["impls"].get("eager", {}), workload["impls"].get("eager (again)", {})
        if "median_s" not in eager or "median_s" not in again:
            continue
        load = workload.get("load_average")
        rows.append(
            f"| {workload['name']} | {_ms(eager['median_s'])} | {_ms(again['median_s'])} "
            f"| {noise_cell(workload)} | {workload.get('eager_vs_itself_pct', float('nan')):.1f}% "
            f"| {eager['max_s'] / eager['min_s']:.2f} | {eager.get('samples', 0)} "
            f"| {eager.get('page_faults_per_call', float('nan')):.1f} "
            f"| {f'{load[0][0]:.1f}' if load else NOT_APPLICABLE} |"
        )
    return rows


def _overhead_lines(workloads: list[dict[str, Any]]) -> list[str]:
    tiny = next((w for w in workloads if w["name"] == OVERHEAD_WORKLOAD and w.get("status") == "ok"), None)
    if tiny is None or "median_s" not in tiny["impls"].get("eager", {}):
        return ["Not measured."]
    eager = tiny["impls"]["eager"]["median_s"]
    lines = ["| implementation | median per call (µs) | over eager (µs) |", "|---|---|---|"]
    for name, rec in tiny["impls"].items():
        if "median_s" in rec:
            lines.append(f"| {name} | {rec['median_s'] * 1e6:.1f} | {(rec['median_s'] - eager) * 1e6:+.1f} |")
        else:
            lines.append(f"| {name} | {_cell(rec.get('error', 'not timed'))} | {NOT_APPLICABLE} |")
    return lines


def _listed(workloads: list[dict[str, Any]], key: str) -> list[str]:
    lines = []
    for workload in workloads:
        for name, rec in workload["impls"].items():
            for item in rec.get(key) or []:
                lines.append(f"- {workload['name']} / {name}: {item}")
    return lines or ["None."]


def write_markdown(results: dict[str, Any], path: pathlib.Path) -> None:
    """Write the human report: machine and date, the results table, noise floor, overhead, breaks, skips."""
    machine = results["machine"]
    env = ", ".join(f"`{k}={v}`" for k, v in machine["env"].items())
    workloads = [w for w in results["workloads"] if w.get("status") == "ok"]
    skipped = [w for w in results["workloads"] if w.get("status") == "skipped"]
    lines = [
        "# dynajit benchmarks: eager vs torch.compile vs dynajit",
        "",
        f"Measured {results['date']} on {machine['cpu']} ({machine['cores_usable']} usable cores), {machine['os']}, "
        f"{machine['libc']}, Python {machine['python']}, torch {machine['torch']} "
        f"({machine['torch_threads']} threads). Mode: {results['mode']}, "
        f"whole run {results['total_seconds']:.0f}s, dynajit at revision {results.get('revision', 'unknown')}. "
        f"Command: `{results['command']}`.",
        "",
        f"Load average (1/5/15 min) of the machine at the start: {_load(results, 'start')}, at the end: "
        f"{_load(results, 'end')}; with more runnable processes than cores, every figure is noisier.",
        "",
        *reliability_lines(results),
        "",
        f"Environment of the benchmark process: {env}. The malloc thresholds keep freed tensors' pages mapped, so "
        "eager does not fault its buffers back in on every call (see `benchmarks/README.md`).",
        "",
        "Times are per call: median of interleaved samples, with min-max. Speedup is the median over rounds of "
        "eager's sample over the implementation's sample of the same round (the chart's whiskers are the "
        "quartiles of that ratio). Cold compile is the first call with empty on-disk caches; warm compile is the "
        "first call after clearing in-memory caches (on-disk caches kept). Both include that one call's run. "
        "Peak MB is the most the CPU allocator held above its starting level during one call (torch profiler "
        "memory events, in process; the least of three profiled calls after one more). A speedup marked `~` "
        "is within the workload's noise floor; one marked `?` comes from a workload whose noise floor is above "
        "the threshold: unreliable.",
        "",
        headline(results),
        "",
        *(["![speedups](speedups.png)"] if results.get("chart", True) else []),
        "",
        "## Real models",
        "",
        *group_summary(results),
        *model_tables(results),
        "",
        "## Results, every workload and implementation",
        "",
        "| workload | implementation | correct | cold compile (s) | warm compile (s) | median (ms) | min-max (ms) "
        "| speedup | graphs | ops | breaks | peak MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for workload in workloads:
        lines += _result_rows(workload)
    lines += [
        "",
        "## Noise floor: eager timed against itself",
        "",
        "| workload | eager median (ms) | eager (again) median (ms) | noise floor | eager vs itself (paired) "
        "| eager max/min | samples each | eager page faults/call | load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|",
        *_noise_rows(workloads),
        "",
        "The noise floor is (p90-p10)/median of eager's samples (`eager` and `eager (again)` pooled): how far "
        "repeated measurements of the same code spread in this run. A speedup within it is noise (`~`); a floor "
        "above the threshold makes the workload's figures unreliable (`?`). Eager vs itself is the median over "
        "rounds of eager's sample over eager (again)'s, from 1: a bias check, not a floor (load that hits both "
        "alike cancels in it). Load is the 1-minute load average when the workload started.",
        "",
        "## Per-call overhead of a tiny compiled function (`x + 1` on one element)",
        "",
        *_overhead_lines(workloads),
        "",
        "## Start-up: the first compile in the process (imports, worker pools; kept out of the table)",
        "",
        *[f"- {name}: {value}" for name, value in results["startup"].items()],
        "",
        "## Graph break reasons",
        "",
        *_listed(workloads, "break_reasons"),
        "",
        "## Warnings from the compilers while compiling",
        "",
        *_listed(workloads, "warnings"),
        "",
        "## Warnings from the compilers while timing (recompiles, cache limits)",
        "",
        *([f"- {w['name']}: {m}" for w in workloads for m in w.get("warnings_while_timing") or []] or ["None."]),
        "",
        "## Skipped workloads",
        "",
        *([f"- {w['name']}: {w['skip_reason']}" for w in skipped] or ["None."]),
    ]
    notes = results.get("notes") or []
    if notes:
        lines += ["", "## Notes", "", *[f"- {note}" for note in notes]]
    for name, extra in (results.get("extra") or {}).items():
        lines += ["", f"## {name}", ""]
        if extra.get("error"):
            lines.append(f"{extra['error']}")
            lines.append("")
        if extra.get("output"):
            lines += ["```", extra["output"].rstrip(), "```"]
        elif extra.get("returned") is not None:  # printed output already shows it; JSON keeps both
            lines += ["```json", json.dumps(extra["returned"], indent=2, default=str), "```"]
    repository = str(pathlib.Path(__file__).resolve().parents[2]) + "/"
    path.write_text("\n".join(lines).replace(repository, "") + "\n")  # paths relative to the repository


def _summary_cell(rec: dict[str, Any], workload: dict[str, Any]) -> str:
    if "speedup" not in rec:
        return _cell(rec.get("error", "not run"))[:160]  # long enough for the reason a compile failed
    mark = "" if rec.get("correct") == "ok" else f" {_cell(rec.get('correct', ''))[:40]}"
    graphs = f"{_count(rec.get('graphs'))} graphs, {_count(rec.get('breaks'))} breaks"
    speedup = speedup_text(rec, workload)
    return f"**{speedup}**{mark}; compile {_s(rec.get('cold_compile_s'))} / {_s(rec.get('warm_compile_s'))} s; {graphs}"


def geometric_means(results: dict[str, Any]) -> dict[str, tuple[float, int, int]]:
    """Per compiler: (geometric mean speedup, workloads it ran correctly, workloads measured) over the small
    programs, tiny_call excluded (real models have their per-group means)."""
    workloads = [
        w
        for w in results["workloads"]
        if w.get("status") == "ok" and w["name"] != OVERHEAD_WORKLOAD and not w.get("group")
    ]
    means = {}
    for name in results["implementations"]:
        if name in ("eager", "eager (again)"):
            continue
        speedups = [
            w["impls"][name]["speedup"]
            for w in workloads
            if "speedup" in w["impls"].get(name, {}) and w["impls"][name].get("correct", "").startswith("ok")
        ]
        if speedups:
            means[name] = (math.exp(sum(map(math.log, speedups)) / len(speedups)), len(speedups), len(workloads))
    return means


def headline(results: dict[str, Any]) -> str:
    means = geometric_means(results)
    if not any(w.get("status") == "ok" and not w.get("group") for w in results["workloads"]):
        return "No small program was measured in this run."
    if not means:
        return "No compiler ran a small program correctly."
    noisy = any(
        not w.get("reliable", True) for w in results["workloads"] if w.get("status") == "ok" and not w.get("group")
    )
    mark = "?" if noisy else ""  # the reliability notes above the headline say why
    parts = [f"{name} **{mean:.2f}x{mark}** ({done}/{total} workloads)" for name, (mean, done, total) in means.items()]
    return (
        "Geometric mean speedup over eager on the small programs (run correctly, tiny_call excluded): "
        + ", ".join(parts)
        + "."
    )


def summary_table(results: dict[str, Any]) -> list[str]:
    """One row per small workload (real models have :func:`model_tables`): eager's time and noise floor, then per
    compiler: speedup; cold / warm compile; graphs."""
    compilers = [name for name in results["implementations"] if name not in ("eager", "eager (again)")]
    lines = [
        "| workload | eager (ms) | noise floor | " + " | ".join(compilers) + " |",
        "|---" * (3 + len(compilers)) + "|",
    ]
    for workload in results["workloads"]:
        if workload.get("status") != "ok" or workload.get("group"):
            continue
        eager = workload["impls"]["eager"]
        cells = [workload["name"], _ms(eager.get("median_s")), noise_cell(workload)]
        cells += [_summary_cell(workload["impls"].get(name, {}), workload) for name in compilers]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


README_START = "<!-- latest-results:start -->"
README_END = "<!-- latest-results:end -->"


def update_readme(results: dict[str, Any], readme: pathlib.Path, results_dir: str, per_model: bool = False) -> bool:
    """Replace the block between the latest-results markers of ``readme`` with this run's summary and chart
    (``per_model``: with every real model's row too).

    Returns False (and changes nothing) when the markers are missing.
    """
    text = readme.read_text()
    if README_START not in text or README_END not in text:
        return False
    machine = results["machine"]
    block = [
        README_START,
        f"Measured {results['date']} on {machine['cpu']} ({machine['cores_usable']} usable cores), "
        f"torch {machine['torch']}, Python {machine['python']} ({results['mode']} run, "
        f"{results['total_seconds']:.0f}s, load average {_load(results, 'start')} at the start). "
        f"Every figure: [{results_dir}/latest.md]({results_dir}/latest.md).",
        "",
        *reliability_lines(results),
        "",
        *group_summary(results),
        *(model_tables(results) if per_model else []),
        "",
        headline(results),
        "",
        *summary_table(results),
        "",
        *([f"![speedups]({results_dir}/speedups.png)"] if results.get("chart", True) else []),
        README_END,
    ]
    before, rest = text.split(README_START, 1)
    after = rest.split(README_END, 1)[1]
    readme.write_text(before + "\n".join(block) + after)
    return True


def write_json(results: dict[str, Any], path: pathlib.Path) -> None:
    path.write_text(json.dumps(results, indent=2, sort_keys=False, default=str) + "\n")


def write_chart(results: dict[str, Any], path: pathlib.Path) -> str | None:
    """Grouped bars of each compiler's speedup per workload (log scale), whiskers at its quartiles,
    and each workload's noise floor shaded around 1.

    Returns None on success, or why no chart was drawn (matplotlib missing).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError as exc:
        return f"no chart: matplotlib is not installed ({exc})"
    workloads = [w for w in results["workloads"] if w.get("status") == "ok" and not w.get("group")]
    compilers = [name for name in results["implementations"] if name not in ("eager", "eager (again)")]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.4 * len(workloads) + 2), 4.6))
    width = 0.8 / max(1, len(compilers))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    handles = [Patch(color="grey", alpha=0.3, label="noise floor (eager vs eager)")]
    for index, name in enumerate(compilers):
        color = colors[index % len(colors)]
        xs, heights, low, high = [], [], [], []
        for position, workload in enumerate(workloads):
            rec = workload["impls"].get(name, {})
            x = position + (index - (len(compilers) - 1) / 2) * width
            if "speedup" not in rec:
                ax.text(x, 1.0, " failed", rotation=90, ha="center", va="bottom", fontsize=7, color=color)
                continue
            xs.append(x)
            heights.append(rec["speedup"])
            low.append(rec["speedup"] - rec["speedup_quartiles"][0])
            high.append(rec["speedup_quartiles"][1] - rec["speedup"])
        ax.bar(xs, heights, width, color=color, yerr=[low, high], capsize=2, error_kw={"linewidth": 0.8})
        handles.append(Patch(color=color, label=name))
    for position, workload in enumerate(workloads):
        noise = min(workload.get("noise_floor_pct") or 100.0, 100.0) / 100  # unknown: shade a full 2x band
        # Symmetric on the log axis, so a noise floor above 100% still draws a band.
        ax.fill_between(
            [position - 0.45, position + 0.45], 1 / (1 + noise), 1 + noise, color="grey", alpha=0.3, zorder=0
        )
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(workloads)), [w["name"] for w in workloads], rotation=20, ha="right")
    ax.set_ylabel("speedup over eager\n(median of per-round ratios, log scale)")
    machine = results["machine"]
    ax.set_title(
        f"{results['date']}: {machine['cpu']}, {machine['cores_usable']} cores, torch {machine['torch']}", fontsize=9
    )
    ax.legend(handles=handles, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None
