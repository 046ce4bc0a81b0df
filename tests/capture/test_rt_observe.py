"""``observe``: one record per converted frame with its graphs, graph breaks (full user stack), guards, recompiles."""

from __future__ import annotations

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _helper(x):
    capture.graph_break()
    return x


def _breaks_inside_a_call(x):
    y = torch.sin(x) + 1
    y = _helper(y)
    return torch.cos(y) * 2


def _line_of(fn, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_a_graph_break_gives_records_with_graphs_guards_and_the_full_user_stack() -> None:
    counter = CompileCounter()
    compiled = capture.optimize(counter)(_breaks_inside_a_call)
    x = torch.randn(3)
    seen_by_callback = []
    with capture.observe(seen_by_callback.append) as seen:
        torch.testing.assert_close(compiled(x), _breaks_inside_a_call(x))
    assert seen.frames == seen_by_callback
    first = seen.frames[0]
    assert (first.code, first.name, first.kind) == (_breaks_inside_a_call.__code__, "_breaks_inside_a_call", "compiled")
    assert first.location == f"{__file__}:{_breaks_inside_a_call.__code__.co_firstlineno}"
    (brk,) = first.graph_breaks
    assert "graph_break()" in brk.reason
    outer, inner = brk.user_stack[-2:]  # the caller's line, then the break inside the inlined helper
    assert (outer.filename, outer.lineno, outer.name) == (
        __file__,
        _line_of(_breaks_inside_a_call, "_helper(y)"),
        "_breaks_inside_a_call",
    )
    assert (inner.filename, inner.lineno, inner.name) == (__file__, _line_of(_helper, "graph_break()"), "_helper")
    assert "TENSOR_MATCH" in str(first.guards) and first.compile_id is not None and first.seconds > 0
    assert first.graphs and all(graph.compile_seconds >= 0 for graph in first.graphs)
    assert torch.sin in [node.target for node in first.graphs[0].graph_module.graph.nodes]
    assert [graph.graph_module for graph in seen.graphs] == counter.graphs
    # the helper, called in Python at the break, is a frame of its own (and breaks again there)
    assert [(frame.name, frame.kind) for frame in seen.frames][:2] == [
        ("_breaks_inside_a_call", "compiled"),
        ("_helper", "compiled"),
    ]
    assert seen.graph_breaks[0] == brk and seen.graph_breaks[1].user_stack[-1].name == "_helper"
    assert not first.recompile_reasons


def test_a_recompile_says_which_guard_failed_and_nothing_is_recorded_outside_the_block() -> None:
    def scale(x):
        return x * 2

    compiled = capture.optimize(CompileCounter())(scale)
    compiled(torch.ones(2))
    with capture.observe() as seen:
        compiled(torch.ones(2))  # a hit: no record
        compiled(torch.ones(3, dtype=torch.float64))
    (record,) = seen.frames
    assert record.kind == "compiled"
    (reason,) = record.recompile_reasons
    assert "x" in reason and ("size" in reason or "dtype" in reason)
    compiled(torch.ones(4, dtype=torch.int64))
    assert len(seen.frames) == 1
    assert not capture._observe.active()


def test_skipped_frames_fullgraph_errors_and_exports_are_recorded() -> None:
    def no_tensors(n):
        return n + 1

    def breaks(x):
        print("", end="")
        return x + 1

    def exported(x, scale=2.0):
        return x * scale

    with capture.observe() as outer, capture.observe() as seen:
        capture.optimize(CompileCounter())(no_tensors)(1)
        with pytest.raises(Exception, match="print"):
            capture.optimize(CompileCounter(), fullgraph=True)(breaks)(torch.ones(1))
        capture.export(exported)(torch.ones(2))
    assert [(frame.name.rsplit(".", 1)[-1], frame.kind) for frame in seen.frames] == [
        ("no_tensors", "skip"),
        ("breaks", "error"),
        ("exported", "export"),
    ]
    assert outer.frames == seen.frames
    skipped, error, export = seen.frames
    assert "no tensor operations" in skipped.reason
    (brk,) = error.graph_breaks
    assert brk.user_stack[-1].lineno == _line_of(breaks, "print(")
    assert len(export.graphs) == 1 and "TENSOR_MATCH" in str(export.guards)


def test_a_callback_error_reaches_the_caller() -> None:
    def f(x):
        return x - 1

    def refuse(record):
        raise LookupError("observer refused")

    with capture.observe(refuse), pytest.raises(LookupError, match="observer refused"):
        capture.optimize(CompileCounter())(f)(torch.ones(1))


def test_the_cache_limit_is_recorded_with_the_guard_failures() -> None:
    def limited(x):
        return x + 2

    compiled = capture.optimize(CompileCounter())(limited)
    # strict=False: this test checks the non-strict fallback itself (test_rt_strict covers strict mode)
    with capture.config.patch(cache_size_limit=1, strict=False), capture.observe() as seen:
        compiled(torch.ones(1))
        with pytest.warns(capture.RecompileLimitWarning):
            torch.testing.assert_close(compiled(torch.ones(2)), limited(torch.ones(2)))
    first, limit = seen.frames
    assert (first.kind, limit.kind) == ("compiled", "cache_limit")
    assert "cache_size_limit (1)" in limit.reason and "size" in limit.recompile_reasons[0]
    assert not limit.graphs and limit.compile_id is None
