"""Printers: the node table and the generated code annotated with the user's source lines."""

import operator
import re

import pytest
import torch

from dynajit.fxgraph import (
    GraphBuilder,
    format_readable,
    format_stack_trace,
    format_tabular,
    target_name,
    user_source_line,
)


def _model_graph():
    lin = torch.nn.Linear(3, 4)
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.randn(2, 3))
    with b.node_meta(stack_trace=format_stack_trace([("/u/m.py", 5, "forward", "y = self.linear(x)")])):
        y = b.call_module("linear", lin, (x,))
    r = b.call_function(torch.relu, (y,))
    trace = format_stack_trace(
        [("/u/m.py", 7, "forward", "return self.head(y)"), ("/u/head.py", 2, "head", "return y.sum(dim=0), y[0]")]
    )
    with b.node_meta(stack_trace=trace):
        s = b.call_method("sum", (r,), {"dim": 0})
        g = b.call_function(operator.getitem, (r, 0))
    b.output((s, g))
    return b.build()


def test_format_tabular_lists_every_node_in_columns():
    text = format_tabular(_model_graph())
    lines = text.splitlines()
    assert lines[0].split() == ["opcode", "name", "target", "args", "kwargs"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    rows = [re.split(r"\s{2,}", line) for line in lines[2:]]
    assert rows == [
        ["placeholder", "x", "x", "()", "{}"],
        ["call_module", "linear", "linear", "(x,)", "{}"],
        ["call_function", "relu", "torch.relu", "(linear,)", "{}"],
        ["call_method", "sum_1", "sum", "(relu,)", "{dim: 0}"],
        ["call_function", "getitem", "operator.getitem", "(relu, 0)", "{}"],
        ["output", "output", "output", "((sum_1, getitem),)", "{}"],
    ]
    # Columns line up: each header starts where its values start.
    for header in ("name", "target", "args"):
        column = lines[0].index(header)
        assert all(line[column - 2 : column] == "  " for line in lines[2:])


def test_format_tabular_takes_a_graph_too():
    gm = _model_graph()
    assert format_tabular(gm.graph) == format_tabular(gm)
    with pytest.raises(TypeError, match="Graph or GraphModule"):
        format_tabular("not a graph")


def test_format_readable_puts_the_user_line_above_each_node():
    text = format_readable(_model_graph())
    lines = text.splitlines()
    assert lines[0] == "def forward(self, x):"
    linear = next(i for i, line in enumerate(lines) if line.lstrip().startswith("linear = "))
    assert lines[linear - 1] == "    # /u/m.py:5 in forward: y = self.linear(x)"
    assert lines[linear].endswith("# float32[2, 4]")
    relu = next(i for i, line in enumerate(lines) if line.lstrip().startswith("relu = "))
    assert "no user source line" in lines[relu - 1]
    summed = next(i for i, line in enumerate(lines) if line.lstrip().startswith("sum_1 = "))
    # The innermost frame is the one shown, once for the two nodes of that line.
    assert lines[summed - 1] == "    # /u/head.py:2 in head: return y.sum(dim=0), y[0]"
    assert lines[summed + 1].lstrip().startswith("getitem = ")
    assert lines[-1].strip() == "return (sum_1, getitem)"


def test_format_readable_code_still_runs_as_written():
    gm = _model_graph()
    namespace = {"torch": torch}
    exec(format_readable(gm), namespace)
    inp = torch.randn(2, 3)
    got = namespace["forward"](gm, inp)
    want = gm(inp)
    torch.testing.assert_close(got, want)


def test_user_source_line_reads_the_innermost_frame():
    trace = format_stack_trace([("/a.py", 1, "f", "g()"), ("/b.py", 9, "g", "return x + 1")])
    assert user_source_line(trace) == "/b.py:9 in g: return x + 1"
    assert user_source_line(None) is None
    assert user_source_line("free text\n") == "free text"


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (torch.relu, "torch.relu"),
        (torch.Tensor.add, "torch.Tensor.add"),
        (torch.nn.functional.gelu, "torch.nn.functional.gelu"),
        (operator.getitem, "operator.getitem"),
        (torch.ops.aten.add.Tensor, "aten.add.Tensor"),
        ("relu", "relu"),
        (len, "len"),
    ],
)
def test_target_names(target, name):
    assert target_name(target) == name
