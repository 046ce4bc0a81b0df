"""Log artifacts: switching them on in code and through DYNAJIT_LOGS."""

import logging
import subprocess
import sys

import pytest

from dynajit.fxgraph import ARTIFACTS, _logs, artifact_enabled, artifact_logger, set_logs


@pytest.fixture(autouse=True)
def _restore_levels():
    levels = {name: artifact_logger(name).level for name in ARTIFACTS}
    yield
    for name, level in levels.items():
        artifact_logger(name).setLevel(level)


def test_artifacts_have_one_logger_each():
    assert artifact_logger("graph_breaks").name == "dynajit.graph_breaks"
    assert set(ARTIFACTS) >= {"graph_code", "graph_breaks", "recompiles", "guards", "bytecode", "output_code"}


def test_set_logs_switches_artifacts_on_and_off(caplog):
    set_logs(guards=False, recompiles=False)
    assert not artifact_enabled("guards")
    set_logs("guards", recompiles=True)
    assert artifact_enabled("guards") and artifact_enabled("recompiles")
    with caplog.at_level(logging.INFO, logger="dynajit.guards"):
        artifact_logger("guards").info("- local 'a' TENSOR_MATCH")
    assert "TENSOR_MATCH" in caplog.text
    set_logs(guards=False)
    assert not artifact_enabled("guards") and artifact_enabled("recompiles")


def test_unknown_artifact_names_the_close_match_and_the_known_ones():
    with pytest.raises(ValueError, match=r"did you mean 'graph_breaks'.*known artifacts: graph_code"):
        set_logs("graph_break")
    with pytest.raises(ValueError, match="unknown log artifact 'nope'"):
        artifact_logger("nope")
    with pytest.raises(ValueError, match="unknown log artifact"):
        set_logs(nope=True)


def _run(env_logs: str) -> subprocess.CompletedProcess:
    """Load the log module alone in a fresh interpreter (no torch import, so it is quick) with DYNAJIT_LOGS set."""
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('logs_under_test', {_logs.__file__!r})\n"
        "logs = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(logs)\n"
        "print(logs.artifact_enabled('graph_breaks'), logs.artifact_enabled('recompiles'),"
        " logs.artifact_enabled('guards'))\n"
        "logs.artifact_logger('graph_breaks').info('break at line 3')\n"
        "logs.artifact_logger('guards').info('hidden guard line')\n"
    )
    env = {"DYNAJIT_LOGS": env_logs, "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)


def test_dynajit_logs_environment_switches_artifacts_on_at_import():
    result = _run(" graph_breaks , recompiles")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "False"]
    assert "[dynajit.graph_breaks] break at line 3" in result.stderr
    assert "hidden guard line" not in result.stderr


def test_dynajit_logs_with_an_unknown_name_fails_clearly():
    result = _run("graph_brakes")
    assert result.returncode != 0
    assert "unknown log artifact 'graph_brakes'" in result.stderr
    assert "did you mean 'graph_breaks'" in result.stderr


def test_set_logs_without_arguments_switches_every_artifact_off():
    set_logs("guards", "output_code", recompiles=True)
    set_logs()
    assert not any(artifact_enabled(name) for name in ARTIFACTS)


def test_artifacts_stay_off_in_a_program_that_logs_at_info():
    # (a program's basicConfig(level=INFO) made every artifact, the generated kernels included, print)
    code = (
        "import importlib.util, logging\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "logging.getLogger('dynajit.guards').setLevel(logging.INFO)\n"  # (set before the import: kept)
        f"spec = importlib.util.spec_from_file_location('logs_under_test', {_logs.__file__!r})\n"
        "logs = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(logs)\n"
        "print(sorted(name for name in logs.ARTIFACTS if logs.artifact_enabled(name)))\n"
    )
    env = {"PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['guards']"
