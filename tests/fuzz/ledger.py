"""The fuzzing ledger: one JSON line per finished run, naming the product it ran against, so counts add up
across runs, processes and machines.

A product is named by the git tree of the checkout's ``packages/`` folder that the imported ``dynajit``
distributions come from; a run against a checkout whose ``packages/`` has uncommitted changes, or against
distributions installed from elsewhere, names no product and is not recorded. ``python -m tests.fuzz
--tally`` adds up the runs per product, the product on disk first.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import platform
import subprocess
from dataclasses import dataclass, field

DEFAULT = pathlib.Path(__file__).with_name("ledger.jsonl")
_MODULES = ("dynajit.fxgraph", "dynajit.guards", "dynajit.capture", "dynajit.inductor_lite", "dynajit.compiler")


def _git(folder: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


def product(folders: set[pathlib.Path] | None = None) -> tuple[str | None, str]:
    """The tree hash of ``packages/`` that ``folders`` (by default the imported distributions' folders) come
    from, or None and why there is none."""
    import importlib

    if folders is None:
        folders = {pathlib.Path(importlib.import_module(name).__path__[0]).resolve() for name in _MODULES}
    try:
        roots = {_git(folder, "rev-parse", "--show-toplevel").strip() for folder in folders}
    except (OSError, subprocess.CalledProcessError):
        return None, "dynajit is not imported from a git checkout"
    if len(roots) != 1:
        return None, f"dynajit's distributions come from several checkouts: {sorted(roots)}"
    root = pathlib.Path(roots.pop())
    if not all(folder.is_relative_to(root / "packages") for folder in folders):
        return None, f"dynajit is not imported from {root / 'packages'}"
    if _git(root, "status", "--porcelain", "--", "packages").strip():
        return None, f"{root / 'packages'} has uncommitted changes"
    return _git(root, "rev-parse", "HEAD:packages").strip(), str(root)


def record(path: pathlib.Path, seed: str, start: int, programs: int, classes: list[str], log=print) -> None:
    """Append a finished run of ``programs`` programs from ``seed:start`` to the ledger at ``path``."""
    tree, why = product()
    if tree is None:
        log(f"not recorded in {path}: {why}")
        return
    import torch

    entry = {
        "product": tree,
        "seed": seed,
        "start": start,
        "programs": programs,
        "failure_classes": classes,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    with path.open("a") as ledger:
        ledger.write(json.dumps(entry) + "\n")


@dataclass
class Tally:
    """What the ledger holds for one product."""

    programs: int = 0
    runs: int = 0
    failure_classes: set[str] = field(default_factory=set)
    seeds: set[str] = field(default_factory=set)
    interpreters: set[str] = field(default_factory=set)


def tally(path: pathlib.Path) -> dict[str, Tally]:
    """Runs added up per product, in the order products first appear; a program counted twice (the same
    ``seed:index`` run again against the same product) counts once."""
    totals: dict[str, Tally] = {}
    seen: dict[str, set[tuple[str, int]]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        entry = json.loads(line)
        one = totals.setdefault(entry["product"], Tally())
        done = seen.setdefault(entry["product"], set())
        fresh = {(entry["seed"], i) for i in range(entry["start"], entry["start"] + entry["programs"])} - done
        done |= fresh
        one.programs += len(fresh)
        one.runs += 1
        one.failure_classes.update(entry["failure_classes"])
        one.seeds.add(entry["seed"])
        one.interpreters.add(f"Python {entry['python']} torch {entry['torch']}")
    return totals


def describe(path: pathlib.Path) -> str:
    """The tally as text, the product on disk first."""
    totals = tally(path)
    current, _ = product()
    order = sorted(totals, key=lambda tree: tree != current)
    lines = [f"{path}: {sum(t.programs for t in totals.values())} programs against {len(totals)} products"]
    for tree in order:
        one = totals[tree]
        mark = " (on disk)" if tree == current else ""
        lines.append(
            f"- {tree[:12]}{mark}: {one.programs} programs in {one.runs} runs, {len(one.failure_classes)} failure "
            f"classes, {len(one.seeds)} seeds, {'; '.join(sorted(one.interpreters))}"
        )
        lines += [f"    {key}" for key in sorted(one.failure_classes)]
    if current is not None and current not in totals:
        lines.append(f"- {current[:12]} (on disk): no runs yet")
    return "\n".join(lines)
