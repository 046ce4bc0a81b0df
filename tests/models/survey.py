"""Survey the zoo: per entry, dynajit's result against eager next to torch.compile's graphs and breaks.

Run ``python tests/models/survey.py [--json out.jsonl] [--wide] [name ...]`` (all entries
whose package is installed when no name is given; ``--wide``: the ~150 generic entries of
``wide_zoo.py`` instead of the suite's). Prints one markdown row per
entry as it finishes, then the distinct failure classes ranked by how many
entries they affect.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
os.environ.setdefault("DYNAJIT_STRICT", "1")

from model_checks import Result, check, torch_compile_counts
from zoo import ENTRIES

HEADER = (
    "| entry | correct | graphs | breaks | top break reasons | fallback | dynajit compile s | torch.compile graphs/breaks |\n"
    "|---|---|---|---|---|---|---|---|"
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _failure_class(text: str) -> str:
    """A failure with its specifics (numbers, names in quotes, locations) blurred, to group alike failures."""
    text = re.sub(r" @ \S+", "", text)
    text = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", text)
    return text[:160]


def _classes(result: Result) -> list[str]:
    """The result's failures, one per break reason and fallback, each prefixed with its kind."""
    found = [f"break: {reason}" for reason in result.break_reasons]
    found += [f"fallback: {reason}" for reason in result.fallbacks]
    if result.error:
        found.append(f"raised: {result.error}")
    elif not result.correct:
        found.append(f"mismatch: {result.mismatch}")
    if result.recompiled:
        found.append("recompiled on a second call with the same shapes")
    if not result.break_reasons and result.graphs != 1 and not result.error:
        found.append(f"{result.graphs} graphs without a break")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*")
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--no-reference", action="store_true", help="skip torch.compile's counts")
    parser.add_argument("--wide", action="store_true", help="survey wide_zoo.py's entries")
    options = parser.parse_args()
    if options.wide:
        from wide_zoo import WIDE_ENTRIES as pool
    else:
        pool = ENTRIES
    entries = [e for e in pool if e.available() and (not options.names or e.name in options.names)]
    print(HEADER, flush=True)
    classes: dict[str, set[str]] = collections.defaultdict(set)
    for entry in entries:
        result = check(entry)
        reference = "-"
        reference_reasons: list[str] = []
        if not options.no_reference:
            try:
                graphs, breaks, reference_reasons = torch_compile_counts(entry)
                reference = f"{graphs}/{breaks}"
            except Exception as error:
                reference = f"error: {type(error).__name__}"
        correct = "error" if result.error else ("yes" if result.correct else "NO")
        fallback = "yes" if result.fallbacks else "no"
        print(
            f"| {entry.name} | {correct} | {result.graphs} | {result.breaks} | "
            f"{_cell('; '.join(result.break_reasons[:3]) or result.error)} | {fallback} | "
            f"{result.compile_seconds:.1f} | {reference} |",
            flush=True,
        )
        for failure in _classes(result):
            classes[_failure_class(failure)].add(entry.name)
        if options.json:
            with options.json.open("a") as out:
                record = dict(vars(result), failures=result.failures(), reference=reference)
                record["reference_reasons"] = reference_reasons
                out.write(json.dumps(record) + "\n")
    print("\nFailure classes (entries affected):")
    for text, names in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        print(f"- {len(names)}: {text}\n    {', '.join(sorted(names))}")


if __name__ == "__main__":
    main()
