"""Guard soundness: after compiling, change ONE fact the trace read; the compiled call must give eager's answer.

Each case builds a small program and the state it reads, and a mutation of one fact: an attribute added or
removed (object, class, module, tensor), a global rebound, a closure cell changed, a type swapped, a constant
changed, a dict key added or removed, a list length changed, a module's training flag, a tensor's dtype, shape
or requires_grad, two lists becoming one, ... The harness runs eagerly and compiled before the mutation, checks that the mutation
changes eager's answer (so the case tests something), then checks that compiled == eager after it: the entry
either recompiled or still answers right.

The cases live by family in the ``guard_cases_*`` modules (objects, arguments, globals, containers, modules,
aliasing), each registering its cases in ``guard_cases.CASES``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import guard_cases_aliasing
import guard_cases_arguments
import guard_cases_containers
import guard_cases_globals
import guard_cases_modules
import guard_cases_objects
import pytest
import torch
from guard_cases import CASES

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter

# Importing a family registers its cases in CASES.
FAMILIES = (
    guard_cases_objects,
    guard_cases_arguments,
    guard_cases_globals,
    guard_cases_containers,
    guard_cases_modules,
    guard_cases_aliasing,
)


def _outcome(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "value", fn(*args)
    except Exception as exc:
        return "raised", (type(exc), str(exc))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.requires_grad == b.requires_grad
            and torch.allclose(a.detach(), b.detach(), equal_nan=True)
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


@pytest.fixture
def restore_state():
    """Global torch state and guard_cases_globals' globals as they were: cases change them."""
    grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    deterministic = torch.are_deterministic_algorithms_enabled()
    hooks = dict(torch.nn.modules.module._global_forward_hooks)
    saved = {name: vars(guard_cases_globals)[name] for name in ("G_SCALE", "G_FLAG", "G_NAME", "_g_helper")}
    yield
    torch.use_deterministic_algorithms(deterministic)
    torch.nn.modules.module._global_forward_hooks.clear()
    torch.nn.modules.module._global_forward_hooks.update(hooks)
    for name in ("DYNAJIT_SOUNDNESS_FLAG", "DYNAJIT_SOUNDNESS_SCALE"):
        os.environ.pop(name, None)
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)
    vars(guard_cases_globals).update(saved)


# Facts the runtime, not the trace, gets wrong (each an xfail until fixed there).
KNOWN_FAILURES: dict[str, str] = {}


def _params(names: list[str]) -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[name], strict=True))
        if name in KNOWN_FAILURES
        else name
        for name in names
    ]


def _check_case(name: str, dynamic: bool | None) -> None:
    capture.reset()
    program, make_args, mutate = CASES[name]()
    counter = CompileCounter()
    compiled = capture.optimize(counter, dynamic=dynamic)(program)
    before = _outcome(program, make_args())
    with capture.observe() as seen:
        got = _outcome(compiled, make_args())
    assert _same(got, before), f"before the change: compiled {got!r}, eager {before!r}"
    # The whole program was traced: a fact read by code that ran in Python instead would test nothing.
    breaks = [b.reason for frame in seen.frames for b in frame.graph_breaks]
    assert counter.frame_count >= 1 and not breaks, f"not traced whole: {breaks}"
    mutate()
    after = _outcome(program, make_args())
    assert not _same(after, before), "the change must change eager's answer, or the case tests nothing"
    got = _outcome(compiled, make_args())
    assert _same(got, after), f"after the change: compiled {got!r}, eager {after!r}"


@pytest.mark.parametrize("name", _params(sorted(CASES)))
def test_compiled_follows_eager_after_one_fact_changes(name, restore_state):
    _check_case(name, dynamic=None)


# Cases whose facts are sizes, ints and tensor metadata: again with every size and int symbolic.
DYNAMIC_CASES = sorted(
    name
    for name in CASES
    if name.startswith(("tensor_", "int_", "float_", "star_", "tuple_", "size_", "finfo", "optional_"))
)


@pytest.mark.parametrize("name", _params(DYNAMIC_CASES))
def test_dynamic_compiled_follows_eager_after_one_fact_changes(name, restore_state):
    _check_case(name, dynamic=True)


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40
