"""``explain``'s report and its log collection, checked without compiling anything."""

from __future__ import annotations

import logging
import traceback

import pytest
import torch

from dynajit.compiler._explain import BreakReason, ExplainOutput, _break_reason, _collect, _graph_ops, _guard_lines
from dynajit.fxgraph import artifact_logger


def sample_graph() -> torch.fx.GraphModule:
    def f(x):
        return torch.sin(x).relu() + 1

    return torch.fx.symbolic_trace(f)


def test_graph_ops_lists_every_operation_node_in_order():
    assert _graph_ops(sample_graph()) == [torch.sin, "relu", __import__("operator").add]


def test_str_is_a_readable_report():
    gm = sample_graph()
    frame = traceback.FrameSummary("model.py", 12, "forward", line="print(x)")
    report = ExplainOutput(
        graphs=[gm, gm],
        graph_count=2,
        graph_break_count=1,
        break_reasons=[BreakReason("call to builtin print", (frame,))],
        op_count=6,
        ops_per_graph=[_graph_ops(gm), _graph_ops(gm)],
        guards=["- local 'x' TENSOR_MATCH"],
        compile_times=[0.25, 0.5],
    )
    text = str(report)
    assert text.splitlines()[:3] == ["Graph count: 2", "Graph break count: 1", "Op count: 6"]
    assert "  1. call to builtin print\n    model.py:12 in forward\n      print(x)" in text
    assert "  Graph 1: torch.sin, relu, add" in text
    assert "  - local 'x' TENSOR_MATCH" in text
    assert "Compile times: 0.7500s in total (graph 1 0.2500s, graph 2 0.5000s)" in text


def test_collect_gathers_records_without_printing_an_artifact_that_is_off(capsys):
    logger = artifact_logger("graph_breaks")
    assert not logger.isEnabledFor(logging.INFO)
    with _collect("graph_breaks") as records:
        logger.info("break at %s", "line 3")
    logger.info("after the block")
    assert [record.getMessage() for record in records] == ["break at line 3"]
    assert not logger.isEnabledFor(logging.INFO) and logger.propagate
    assert capsys.readouterr().err == ""


def test_break_reasons_and_guards_prefer_structured_record_extras():
    frame = traceback.FrameSummary("m.py", 3, "f")

    class GraphBreakLike:
        reason = "unsupported opcode"
        user_stack = (frame,)

    structured = logging.LogRecord("dynajit.graph_breaks", logging.INFO, "m.py", 3, "text", (), None)
    structured.graph_break = GraphBreakLike()
    assert _break_reason(structured) == BreakReason("unsupported opcode", (frame,))
    plain = logging.LogRecord("dynajit.graph_breaks", logging.INFO, "m.py", 3, "graph break: %s", ("print",), None)
    assert _break_reason(plain) == BreakReason("graph break: print")
    guards = logging.LogRecord("dynajit.guards", logging.INFO, "m.py", 3, "- a\n\n- b\n", (), None)
    assert _guard_lines(guards) == ["- a", "- b"]


def test_explain_rejects_an_unknown_backend_at_once():
    from dynajit.compiler import explain
    from dynajit.compiler._registry import BackendNotFound

    with pytest.raises(BackendNotFound):
        explain(lambda x: x, backend="nope")


def test_a_break_message_with_a_location_gives_a_one_frame_user_stack():
    record = logging.LogRecord(
        "dynajit.graph_breaks",
        logging.INFO,
        "c.py",
        1,
        "Graph break: %s at %s%s",
        ("print", "/m.py:7", "\n    print(x)"),
        None,
    )
    reason = _break_reason(record)
    assert reason.reason == "print"
    (frame,) = reason.user_stack
    assert (frame.filename, frame.lineno, frame.line) == ("/m.py", 7, "print(x)")
