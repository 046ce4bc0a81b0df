"""Every zoo entry compiled by dynajit (inductor backend): equal to eager, one graph, no break, no fallback.

Each entry runs eagerly and compiled on fresh copies with the same weights and
inputs (see model_checks.py). The entries that fail today are listed in
``KNOWN_FAILURES`` with the concrete failure; they are strict xfails, so one
that starts passing fails the suite until its line is removed.
"""

from __future__ import annotations

import pytest
from model_checks import check
from zoo import ENTRIES, Entry

pytestmark = pytest.mark.slow

# entry name -> what fails today (the first failure check() reports)
KNOWN_FAILURES: dict[str, str] = {}


def _param(entry: Entry) -> object:
    marks = [pytest.mark.slow]
    if entry.name in KNOWN_FAILURES:
        marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[entry.name]))
    return pytest.param(entry, id=entry.name, marks=marks)


@pytest.mark.parametrize("entry", [_param(entry) for entry in ENTRIES])
def test_model(entry: Entry) -> None:
    pytest.importorskip(entry.package)
    result = check(entry)
    failures = result.failures()
    assert not failures, f"{entry.name}:\n  " + "\n  ".join(failures)


def test_known_failures_name_entries() -> None:
    names = {entry.name for entry in ENTRIES}
    assert set(KNOWN_FAILURES) <= names, sorted(set(KNOWN_FAILURES) - names)
