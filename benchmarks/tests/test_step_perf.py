"""step_perf's reading of ``perf report`` text: samples per name, as microseconds per call."""

from __future__ import annotations

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from step_perf import parse_report

REPORT = """# Samples: 3K of event 'cpu-clock'
#
# Overhead       Samples  Symbol
# ........  ............  ......
#
    50.00%          2000  [.] _PyEval_EvalFrameDefault
    25.00%          1000  [.] at::native::as_strided_tensorimpl(at::Tensor const&)
     0.05%             2  [k] clear_page_erms
"""


def test_samples_become_microseconds_per_call():
    per_call = parse_report(REPORT, "sym", calls=500)
    assert per_call["_PyEval_EvalFrameDefault"] == pytest.approx(4000.0)  # 2000 ms of samples over 500 calls
    assert per_call["at::native::as_strided_tensorimpl(at::Tensor const&)"] == pytest.approx(2000.0)
    assert per_call["clear_page_erms"] == pytest.approx(4.0)
    assert len(per_call) == 3  # the header's lines are not names


def test_libraries_are_named_whole():
    per_call = parse_report("    43.16%          8634  libpython3.11.so.1.0\n", "dso", calls=8634)
    assert per_call == {"libpython3.11.so.1.0": pytest.approx(1000.0)}
