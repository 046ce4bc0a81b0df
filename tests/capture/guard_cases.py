"""The registry of guard-soundness cases, which test_sym_guard_soundness.py runs.

``@case`` registers a setup in ``CASES``; the cases themselves live by family in the ``guard_cases_*`` modules
(objects, arguments, globals, containers, modules), each importing ``case`` and the helpers below.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

Program = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], Callable[[], None]]
CASES: dict[str, Callable[[], Program]] = {}


def case(setup: Callable[[], Program]) -> Callable[[], Program]:
    """Register ``setup``: it returns (program, a maker of fresh arguments, the mutation)."""
    CASES[setup.__name__] = setup
    return setup


class Holder:
    """A plain object holding attributes (SimpleNamespace reads run in C: a graph break, testing nothing)."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


def _ones(*shape: int) -> Callable[[], tuple[Any, ...]]:
    return lambda: (torch.ones(*shape),)
