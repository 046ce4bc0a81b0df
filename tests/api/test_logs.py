"""``set_logs`` and the environment (``DYNAJIT_LOGS``, ``DYNAJIT_<FIELD>``) from the user's side."""

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


def test_environment_switches_artifacts_on_and_overrides_config_fields():
    code = (
        "import logging, dynajit.compiler as c\n"
        "print(*(logging.getLogger(f'dynajit.{a}').isEnabledFor(logging.INFO)"
        " for a in ('graph_breaks', 'recompiles', 'guards')), c.config.cache_size_limit, c.config.verbose)"
    )
    env = {**os.environ, "DYNAJIT_LOGS": "graph_breaks, recompiles", "DYNAJIT_CACHE_SIZE_LIMIT": "3"}
    env["DYNAJIT_VERBOSE"] = "1"
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["True", "True", "False", "3", "True"]
