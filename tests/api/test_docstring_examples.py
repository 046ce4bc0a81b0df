"""The examples in the public docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "dynajit.compiler._compile",
    "dynajit.compiler._forward",
    "dynajit.compiler._registry",
    "dynajit.compiler._explain",
    "dynajit.compiler._config",
    "dynajit._dynamo._private",
]


@pytest.mark.usefixtures("clean_registry")
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0 and result.failed == 0
