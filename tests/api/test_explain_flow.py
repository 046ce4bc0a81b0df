"""``explain`` on real code: graphs, breaks with user stacks, ops, guards and compile times."""

from __future__ import annotations

import torch

from dynajit import _dynamo, compiler


def with_a_break(x):
    x = torch.sin(x) + 1
    _dynamo.graph_break()
    return torch.cos(x) * 2


def test_explain_reports_graphs_breaks_ops_and_guards():
    x = torch.randn(3)
    report = compiler.explain(with_a_break)(x)
    assert report.graph_count == 2 and len(report.graphs) == 2
    assert report.graph_break_count == 1
    (reason,) = report.break_reasons
    where = reason.user_stack[-1]
    assert (where.filename, where.lineno) == (__file__, with_a_break.__code__.co_firstlineno + 2)
    assert "graph_break()" in reason.reason
    assert report.op_count == 4
    assert [len(ops) for ops in report.ops_per_graph] == [2, 2]
    assert torch.sin in report.ops_per_graph[0]
    assert report.guards
    assert len(report.compile_times) == 2
    text = str(report)
    assert "Graph count: 2" in text and "Graph break count: 1" in text and f"{__file__}:" in text


def test_explain_without_breaks_and_the_private_alias():
    def clean(x):
        return x.relu() + 1

    report = _dynamo.explain(clean)(torch.randn(2))
    assert (report.graph_count, report.graph_break_count, report.op_count) == (1, 0, 2)


def test_explain_a_compiled_module_explains_the_module_it_wraps():
    module = torch.nn.Linear(3, 2)
    compiled = compiler.compile(module, backend="eager")
    x = torch.randn(1, 3)
    report = compiler.explain(compiled)(x)
    assert report.graph_count == 1 and report.graph_break_count == 0
    torch.testing.assert_close(compiled(x), module(x))


def _inner(x):
    _dynamo.graph_break()
    return x


def breaks_in_a_call(x):
    x = torch.sin(x)
    x = _inner(x)
    return torch.cos(x)


def test_break_reasons_carry_the_full_user_stack_and_logs_stay_quiet(capsys):
    report = compiler.explain(breaks_in_a_call)(torch.randn(2))
    first = report.break_reasons[0]
    caller, callee = first.user_stack[-2:]
    assert (caller.filename, caller.lineno, caller.name) == (
        __file__,
        breaks_in_a_call.__code__.co_firstlineno + 2,
        "breaks_in_a_call",
    )
    assert (callee.filename, callee.lineno, callee.name) == (__file__, _inner.__code__.co_firstlineno + 1, "_inner")
    text = str(report)
    assert f"{__file__}:{caller.lineno} in breaks_in_a_call" in text and "in _inner" in text
    assert capsys.readouterr().err == ""
