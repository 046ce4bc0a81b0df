"""Dynamic shapes: automatic dynamic, dynamic=True/False, marks, symbolic graphs, readable shape guards.

Every case runs the function eagerly and compiled on the same inputs and
compares, then counts compilations.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter
from dynajit.fxgraph import is_symbolic


def assert_same(actual: Any, expected: Any, what: str = "result") -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{what}: {m}")


def _run_sizes(fn: Callable[..., Any], make_args: Callable[[int], tuple[Any, ...]], sizes: list[int], **settings: Any):
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, **settings)(fn)
    for size in sizes:
        args = make_args(size)
        assert_same(compiled(*args), fn(*args), f"size {size}")
    return counter, compiled


def _pair(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(n, 3), torch.randn(n, 3)


def _scaled_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * 2 + y).sum(0) / x.shape[0]


def test_a_changed_size_recompiles_once_with_that_dimension_dynamic() -> None:
    counter, _ = _run_sizes(_scaled_sum, _pair, [4, 7, 9, 12])
    assert counter.frame_count == 2
    first, second = counter.graphs
    assert not any(is_symbolic(n.meta["example_value"]) for n in first.graph.nodes if n.op == "placeholder")
    example = next(n for n in second.graph.nodes if n.op == "placeholder").meta["example_value"]
    assert isinstance(example.shape[0], torch.SymInt) and example.shape[1] == 3


def test_dynamic_true_compiles_once_and_dynamic_false_every_time() -> None:
    assert _run_sizes(_scaled_sum, _pair, [4, 7, 9, 12], dynamic=True)[0].frame_count == 1
    assert _run_sizes(_scaled_sum, _pair, [4, 7, 9, 12], dynamic=False)[0].frame_count == 4


def test_sizes_zero_and_one_are_specialised_not_covered_by_the_dynamic_entry() -> None:
    counter, _ = _run_sizes(_scaled_sum, _pair, [4, 7, 1, 2, 30, 1, 0, 0, 9])
    # static 4; dynamic (sizes >= 2) at 7; a graph for 1; one for 0; 2, 30 and 9 reuse the dynamic one
    assert counter.frame_count == 4
    dynamic, one, zero = (
        next(n for n in g.graph.nodes if n.op == "placeholder").meta["example_value"] for g in counter.graphs[1:]
    )
    assert isinstance(dynamic.shape[0], torch.SymInt)
    assert (one.shape[0], zero.shape[0]) == (1, 0)


def _broadcast_sum(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x + y).sum(0)


def test_a_dynamic_size_of_one_broadcasts_as_in_eager() -> None:
    # Compiled with x and y of one size, the graph adds them elementwise; a call with x of size 1 must not run it.
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, dynamic=True)(_broadcast_sum)
    for n, m in [(5, 5), (6, 6), (1, 6), (6, 1), (0, 1), (1, 0)]:
        x, y = torch.randn(n, 3), torch.randn(m, 3)
        assert_same(compiled(x, y), _broadcast_sum(x, y), f"sizes {n}, {m}")
    assert counter.frame_count == 5


def _tail_mean(x: torch.Tensor) -> torch.Tensor:
    return x[1:].sum(0) + x.shape[0]


def test_a_slice_traced_at_a_dynamic_size_is_valid_at_zero() -> None:
    counter, _ = _run_sizes(_tail_mean, lambda n: (torch.randn(n, 2),), [3, 5, 0, 1, 8])
    assert counter.frame_count == 4


def test_symbolic_sizes_flow_into_views_and_python_arithmetic() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        flat = x.reshape(b * t, d)
        return flat.view(b, t * d).sum(1) + x.size(1)

    counter, _ = _run_sizes(fn, lambda n: (torch.randn(n, n + 1, 4),), [2, 5, 8, 11])
    assert counter.frame_count == 2
    targets = {str(n.target) for n in counter.graphs[1].graph.nodes}
    assert "size" in targets  # the sizes are read from the input in the graph, not baked in


def test_an_int_argument_that_changes_becomes_a_graph_input() -> None:
    def fn(x: torch.Tensor, n: int) -> torch.Tensor:
        return x * n + n

    counter, _ = _run_sizes(fn, lambda n: (torch.randn(3), n), [2, 3, 4, 10])
    assert counter.frame_count == 2
    examples = [n.meta["example_value"] for n in counter.graphs[1].graph.nodes if n.op == "placeholder"]
    assert any(isinstance(e, torch.SymInt) for e in examples)


def test_a_branch_on_a_size_is_guarded_not_baked_in() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 8:
            return x + 1
        return x - 1

    counter, _ = _run_sizes(fn, lambda n: (torch.randn(n),), [4, 5, 6, 20, 7, 30])
    # static 4; dynamic with "<= 8"; then a size over 8 needs its own entry (the guard fails)
    assert counter.frame_count == 3


def test_shape_guards_print_with_source_names() -> None:
    capture.reset()
    compiled = capture.optimize(CompileCounter(), dynamic=True)(lambda x, y: x + y)
    a, b = torch.randn(5, 3), torch.randn(5, 3)
    capture.mark_dynamic(a, 0, min=2, max=64)
    compiled(a, b)
    text = str(capture.last_guards(compiled)) if hasattr(capture, "last_guards") else _guards_text(compiled, a, b)
    assert "L['x'].size()[0] == L['y'].size()[0]" in text
    assert "2 <= L['x'].size()[0]" in text and "L['x'].size()[0] <= 64" in text


def _guards_text(compiled: Callable[..., Any], *args: Any) -> str:
    with capture.observe() as seen:
        capture.reset()
        compiled(*args)
    return "\n".join(str(frame.guards) for frame in seen.frames)


def test_mark_dynamic_compiles_dynamic_first_and_rejects_sizes_outside_its_range() -> None:
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(lambda x: x.softmax(-1))
    for n in (6, 9, 16):
        x = torch.randn(n, 4)
        capture.mark_dynamic(x, 0, min=2, max=16)
        assert_same(compiled(x), x.softmax(-1))
    assert counter.frame_count == 1
    x = torch.randn(17, 4)
    capture.mark_dynamic(x, 0, min=2, max=16)
    with pytest.raises(capture.DynamicShapeError, match=r"L\['x'\]\.size\(\)\[0\] is 17, outside the range \[2, 16\]"):
        compiled(x)


def test_mark_dynamic_on_a_dimension_the_program_specialises_is_an_error() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if x.shape[0] == 6 else x

    capture.reset()
    x = torch.randn(6)
    capture.mark_dynamic(x, 0)
    with pytest.raises(capture.DynamicShapeError, match=r"specialises it to 6.*maybe_mark_dynamic"):
        capture.optimize(CompileCounter())(fn)(x)


def test_maybe_mark_dynamic_lets_the_program_specialise() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x + 1 if x.shape[0] == 6 else x * 2

    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(fn)
    for n in (6, 7, 8):
        x = torch.randn(n)
        capture.maybe_mark_dynamic(x, 0)
        assert_same(compiled(x), fn(x))
    assert counter.frame_count == 2  # one for 6, one dynamic entry for sizes other than 6


def test_mark_static_keeps_a_dimension_static_under_dynamic_true() -> None:
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, dynamic=True)(lambda x: x.sum(1))
    for n, m in ((3, 4), (5, 4), (5, 6), (7, 6)):
        x = torch.randn(n, m)
        capture.mark_static(x, 1)
        assert_same(compiled(x), x.sum(1))
    assert counter.frame_count == 2  # dim 0 dynamic throughout; dim 1 static, so 6 recompiles


def test_transposed_inputs_keep_their_layout_guarded() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.sum(0)

    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter, dynamic=True)(fn)
    for x in (torch.randn(4, 6).t(), torch.randn(5, 6).t(), torch.randn(6, 5), torch.randn(3, 8)[:, ::2]):
        assert_same(compiled(x), fn(x))
    assert counter.frame_count == 3  # transposed layout, contiguous layout, and a strided slice (static)


def test_the_recompiles_log_names_the_dimension(caplog: pytest.LogCaptureFixture) -> None:
    capture.reset()
    from dynajit.fxgraph import set_logs

    set_logs(recompiles=True)
    try:
        with caplog.at_level(logging.DEBUG):
            _run_sizes(_scaled_sum, _pair, [4, 7])
    finally:
        set_logs(recompiles=False)
    assert "L['x'] size()[0]: expected 4, got 7" in caplog.text


def test_training_with_a_dynamic_batch_matches_eager_gradients() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))

    def step(x: torch.Tensor) -> torch.Tensor:
        return model(x).pow(2).mean()

    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(step)
    for n in (3, 5, 9):
        x = torch.randn(n, 4)
        model.zero_grad()
        step(x).backward()
        expected = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        compiled(x).backward()
        for got, want in zip([p.grad for p in model.parameters()], expected):
            torch.testing.assert_close(got, want)
    assert counter.frame_count == 2


def test_sizes_computed_in_python_survive_a_graph_break_and_the_return() -> None:
    def fn(x: torch.Tensor) -> tuple[Any, ...]:
        b, t, d = x.shape
        n = b * t
        flat = x.reshape(n, d)
        print("a graph break")
        return flat.sum(0) * (d // 2), n, (b, t)

    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(fn)
    for shape in ((2, 3, 4), (3, 5, 4), (4, 7, 4), (5, 2, 4)):
        x = torch.randn(*shape)
        got, expected = compiled(x), fn(x)
        assert_same(got[0], expected[0])
        assert got[1:] == expected[1:]
    # the frame and its resume function each compile static, then once dynamic: n = b * t is recomputed
    # in Python from the sizes, not specialised
    assert counter.frame_count == 4
