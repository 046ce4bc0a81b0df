"""Settings of the real-model suite: strict mode on, and the suite runs only when asked for.

The suite takes minutes, so a plain ``pytest`` over the repository skips it
with a reason; it runs when tests/models (or a file in it) is named on the
command line, as ``nox -s models`` does, or with ``DYNAJIT_MODELS=1``.
"""

from __future__ import annotations

import os
import pathlib

import pytest

# A frame whose conversion or backend compile fails must fail the test, not run eagerly with a warning.
os.environ["DYNAJIT_STRICT"] = "1"

HERE = pathlib.Path(__file__).parent.resolve()


def _asked_for(config: pytest.Config) -> bool:
    if os.environ.get("DYNAJIT_MODELS") == "1":
        return True
    for arg in config.args:
        path = pathlib.Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _asked_for(config):
        return
    skip = pytest.mark.skip(reason="real-model suite: run `nox -s models` or `pytest tests/models`")
    for item in items:
        if HERE in pathlib.Path(str(item.path)).resolve().parents:
            item.add_marker(skip)
