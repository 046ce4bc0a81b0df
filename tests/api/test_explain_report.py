"""``explain``'s report, built from observed frames, checked without compiling anything."""

from __future__ import annotations

import traceback

import pytest
import torch

import dynajit.capture as capture
from dynajit.compiler._explain import BreakReason, ExplainOutput, _graph_ops, _output_from


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


def test_the_report_gathers_every_observed_frame_in_order():
    gm = sample_graph()
    frame = traceback.FrameSummary("m.py", 3, "f", line="print(x)")
    code = sample_graph.__code__
    graph = capture.CompiledGraph("__compiled_fn_0", gm, gm.forward, [], 0.125)
    observation = capture.Observation(
        [
            capture.FrameRecord(
                code,
                "f",
                "compiled",
                graphs=(graph,),
                graph_breaks=(capture.GraphBreak("print", (frame,)),),
                guards="- a\n\n- b\n",
            ),
            capture.FrameRecord(code, "g", "skip", reason="no tensor operations"),
            capture.FrameRecord(code, "h", "compiled", graphs=(graph,), guards="- c"),
        ]
    )
    report = _output_from(observation)
    assert report.graphs == [gm, gm] and report.graph_count == 2
    assert report.break_reasons == [BreakReason("print", (frame,))] and report.graph_break_count == 1
    assert report.ops_per_graph == [_graph_ops(gm)] * 2 and report.op_count == 6
    assert report.guards == ["- a", "- b", "- c"]
    assert report.compile_times == [0.125, 0.125]


def test_explain_rejects_an_unknown_backend_at_once():
    from dynajit.compiler import explain
    from dynajit.compiler._registry import BackendNotFound

    with pytest.raises(BackendNotFound):
        explain(lambda x: x, backend="nope")
