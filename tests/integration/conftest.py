"""Fixtures the integration suites share, and pytest's assert rewriting for their harness modules."""

import pytest

from dynajit import compiler

pytest.register_assert_rewrite("inductor_differential")


@pytest.fixture
def fresh_compiler():
    """Cases share code objects (one function per parametrisation): each starts with no compiled code."""
    compiler.reset()
    yield
    compiler.reset()
