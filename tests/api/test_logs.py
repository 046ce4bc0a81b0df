"""``set_logs`` and ``DYNAJIT_LOGS`` switch log artifacts on the standard ``logging`` loggers."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from dynajit import compiler


@pytest.fixture
def restore_levels():
    loggers = [logging.getLogger(f"dynajit.{name}") for name in ("graph_breaks", "recompiles")]
    saved = [logger.level for logger in loggers]
    yield
    for logger, level in zip(loggers, saved):
        logger.setLevel(level)


def test_set_logs_switches_artifacts_on_and_off(restore_levels):
    compiler.set_logs("graph_breaks", recompiles=True)
    assert logging.getLogger("dynajit.graph_breaks").isEnabledFor(logging.INFO)
    assert logging.getLogger("dynajit.recompiles").isEnabledFor(logging.INFO)
    compiler.set_logs(graph_breaks=False)
    assert not logging.getLogger("dynajit.graph_breaks").isEnabledFor(logging.INFO)


def test_unknown_artifact_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown log artifact 'graph_break' \(did you mean 'graph_breaks'"):
        compiler.set_logs("graph_break")


def test_dynajit_logs_environment_variable_switches_artifacts_on():
    code = (
        "import logging, dynajit.compiler\n"
        "print(logging.getLogger('dynajit.graph_breaks').isEnabledFor(logging.INFO),"
        " logging.getLogger('dynajit.recompiles').isEnabledFor(logging.INFO),"
        " logging.getLogger('dynajit.guards').isEnabledFor(logging.INFO))"
    )
    env = {**os.environ, "DYNAJIT_LOGS": "graph_breaks, recompiles"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True", "False"]
