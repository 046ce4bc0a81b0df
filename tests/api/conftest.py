"""Fixtures for the api tests: a registry snapshot restored after each test that changes it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dynajit.compiler import _registry


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Start from an unread registry and restore the previous state afterwards."""
    saved = (dict(_registry._registered), dict(_registry._tags), _registry._entry_points)
    _registry._reset_for_tests()
    yield
    _registry._registered.clear()
    _registry._registered.update(saved[0])
    _registry._tags.clear()
    _registry._tags.update(saved[1])
    _registry._entry_points = saved[2]
