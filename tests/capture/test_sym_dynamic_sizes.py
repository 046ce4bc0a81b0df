"""Dynamic sizes and ints at their edges: negative ints, sizes 0 and 1, and facts the trace used about them.

Each case runs the function eagerly and compiled on the same inputs, call
after call, and compares the results (and the arguments afterwards).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _same(actual: Any, expected: Any, what: str) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), what
        assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
        torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}: {m}")
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected) and len(actual) == len(expected), what
        for i, (a, e) in enumerate(zip(actual, expected)):
            _same(a, e, f"{what}[{i}]")
    else:
        assert actual == expected, what


def run_calls(
    fn: Callable[..., Any], calls: Sequence[Callable[[], tuple[Any, ...]]], **settings: Any
) -> CompileCounter:
    """Call ``fn`` eagerly and compiled with the arguments each of ``calls`` makes, comparing everything."""
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, **settings)(fn)
    for i, make in enumerate(calls):
        eager_args, compiled_args = make(), make()
        _same(compiled(*compiled_args), fn(*eager_args), f"call {i}")
        _same(list(compiled_args), list(eager_args), f"arguments after call {i}")
    return counter


def _item_then_clone(x: torch.Tensor) -> torch.Tensor:
    first = x.flatten()[0].item()  # a data-dependent int: the rest of the function resumes with it as a local
    return x.clone() + first


def test_an_int_that_changes_sign_across_a_graph_break_stays_compiled() -> None:
    calls = [lambda v=v: (torch.full((2, 1), v),) for v in (3, 5, -4, 0, 1, -7)]
    counter = run_calls(_item_then_clone, calls)
    assert counter.frame_count >= 2


def _scale(x: torch.Tensor, n: int) -> torch.Tensor:
    return x * n + x[: max(n, 0)].sum()


def test_an_int_argument_may_turn_negative_after_it_became_dynamic() -> None:
    counter = run_calls(_scale, [lambda n=n: (torch.arange(4.0), n) for n in (3, 5, -2, 7, 0, -9)])
    examples = [n.meta["example_value"] for g in counter.graphs for n in g.graph.nodes if n.op == "placeholder"]
    assert any(isinstance(e, torch.SymInt) for e in examples)  # n became a graph input, negative values included
