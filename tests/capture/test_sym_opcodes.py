"""The opcode table covers every opcode of the running CPython, and debug logs show bytecode, graphs and breaks."""

import dis
import glob
import logging
import shutil
import subprocess
import sys

import pytest
import torch

from dynajit.capture._symbolic import tracer as _tracer  # noqa: F401  (registers every handler)
from dynajit.capture._symbolic.registry import BREAKS, HANDLERS, lookup
from dynajit.fxgraph import set_logs


def test_every_opcode_has_a_handler_or_a_break_reason():
    version = sys.version_info[:2]
    missing = [name for name in dis.opmap if lookup(name, version) is None and name not in BREAKS]
    assert not missing, f"opcodes with neither a handler nor a graph-break reason on {version}: {missing}"


def _interpreters() -> list[tuple[str, tuple[int, int]]]:
    found = []
    for minor in (11, 12, 13):
        candidates = [
            *glob.glob(f"/root/.pyenv/versions/3.{minor}.*/bin/python3.{minor}"),
            shutil.which(f"python3.{minor}"),
        ]
        for exe in filter(None, candidates):
            if subprocess.run([exe, "-c", "pass"], capture_output=True).returncode == 0:
                found.append((exe, (3, minor)))
                break
    return found


@pytest.mark.parametrize("exe,version", _interpreters(), ids=lambda v: str(v))
def test_opcode_table_covers_each_installed_python(exe, version):
    """Walk ``dis.opmap`` of every CPython 3.11-3.13 found on this machine, not only the running one."""
    names = subprocess.run(
        [exe, "-c", "import dis; print(' '.join(dis.opmap))"], capture_output=True, text=True, check=True
    ).stdout.split()
    missing = [
        name
        for name in names
        if lookup(name, version) is None and name not in BREAKS and not name.startswith("INSTRUMENTED_")
    ]
    assert not missing, f"opcodes of CPython {version} with neither a handler nor a break reason: {missing}"


def test_break_reasons_are_sentences():
    assert all(len(reason.split()) >= 3 for reason in BREAKS.values())


def test_handlers_are_version_bounded():
    assert lookup("RETURN_CONST", (3, 11)) is None and lookup("RETURN_CONST", (3, 12)) is not None
    assert lookup("KW_NAMES", (3, 13)) is None and lookup("CALL_KW", (3, 13)) is not None
    assert lookup("TO_BOOL", (3, 12)) is None and lookup("TO_BOOL", (3, 13)) is not None
    assert lookup("FORMAT_VALUE", (3, 13)) is None and lookup("FORMAT_SIMPLE", (3, 13)) is not None
    assert all(since < until for entries in HANDLERS.values() for since, until, _ in entries)


def logged_fn(x):
    y = x.cos()
    LOG.append(id(y))
    return y + 1


LOG = []


@pytest.fixture
def logs(caplog):
    set_logs("bytecode", "graph_code", "graph_breaks")
    caplog.set_level(logging.INFO, logger="dynajit")
    yield caplog
    set_logs(bytecode=False, graph_code=False, graph_breaks=False)


def test_logs_show_bytecode_graph_code_and_breaks(logs, check, t):
    check(logged_fn, t(3), graphs=2)
    text = logs.text
    assert "ORIGINAL BYTECODE" in text and "MODIFIED BYTECODE" in text
    assert "__compiled_fn_" in text and "__resume_at_" in text
    assert ("def forward" in text and "torch.cos" in text) or "cos" in text
    assert "Graph break" in text and f"{__file__}:" in text


def test_modified_bytecode_is_valid_for_this_version(t):
    from dynajit.capture._convert import convert_frame
    from dynajit.capture._frame import FrameContext
    from dynajit.capture.testing import CompileCounter

    converted = convert_frame(logged_fn, (t(3),), FrameContext(backend=CompileCounter()))
    ops = {i.opname for i in dis.get_instructions(converted.code)}
    assert "CALL" in ops and ("PRECALL" in ops) == (sys.version_info < (3, 12))
    assert torch.is_tensor(t(1))
