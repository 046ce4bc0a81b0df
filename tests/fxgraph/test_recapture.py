"""Re-capture: each generated line of a GraphModule's forward maps back to its node's source metadata."""

import sys

import pytest
import torch

from dynajit.fxgraph import (
    GraphBuilder,
    format_stack_trace,
    is_generated_forward,
    line_node_map,
    recapture_meta,
    source_meta,
)

LINEAR_TRACE = format_stack_trace([("/user/model.py", 12, "forward", "y = self.linear(x)")])
RELU_TRACE = format_stack_trace([("/user/model.py", 13, "forward", "return torch.relu(y) * 2")])


def scale(t, factor):
    """A plain Python function: not a torch op."""
    return t * factor


def _exported():
    lin = torch.nn.Linear(3, 3)
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.randn(2, 3))
    module_stack = {"L__self___linear": ("linear", torch.nn.Linear)}
    with b.node_meta(stack_trace=LINEAR_TRACE, nn_module_stack=module_stack):
        y = b.call_module("linear", lin, (x,))
    with b.node_meta(stack_trace=RELU_TRACE):
        r = b.call_function(torch.relu, (y,))
        out = b.call_method("mul", (r, 2))
    b.output(out)
    return b.build(), lin


def _executed_lines(gm, *args):
    """The line numbers of gm.forward that really run, from the interpreter's own line events."""
    code = type(gm).forward.__code__
    lines = []

    def tracer(frame, event, arg):
        if frame.f_code is code:
            if event == "line":
                lines.append(frame.f_lineno)
            return tracer
        return None

    sys.settrace(tracer)
    try:
        gm(*args)
    finally:
        sys.settrace(None)
    return lines


def _edit_with_python_op(gm):
    """Insert scale(relu, 3) between relu and mul, as a user editing an exported graph would."""
    relu = next(n for n in gm.graph.nodes if n.name == "relu")
    with gm.graph.inserting_after(relu):
        scaled = gm.graph.call_function(scale, (relu, 3.0))
    relu.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)
    gm.recompile()
    return scaled


def test_each_generated_line_maps_to_its_nodes_metadata():
    gm, _ = _exported()
    originals = {n.name: source_meta(n) for n in gm.graph.nodes}
    inserted = _edit_with_python_op(gm)
    inp = torch.randn(2, 3)
    torch.testing.assert_close(gm(inp), scale(torch.relu(gm.linear(inp)), 3.0) * 2)

    by_line = line_node_map(gm)
    executed = _executed_lines(gm, inp)
    seen = set()
    for lineno in executed:
        node = by_line[lineno]
        seen.add(node.name)
        meta = recapture_meta(gm, lineno)
        if node is inserted or node.op == "output":
            assert meta is None
        else:
            assert meta == originals[node.name]
    assert seen == {"linear", "relu", inserted.name, "mul", "output"}

    linear_line = next(line for line, node in by_line.items() if node.name == "linear")
    meta = recapture_meta(gm, linear_line)
    assert "self.linear(x)" in meta["stack_trace"]
    assert meta["nn_module_stack"] == {"L__self___linear": ("linear", torch.nn.Linear)}
    assert meta["source_fn_stack"] == [("linear", torch.nn.Linear)]
    relu_line = next(line for line, node in by_line.items() if node.name == "relu")
    assert recapture_meta(gm, relu_line)["source_fn_stack"] == [("relu", torch.relu)]


def test_agrees_with_the_line_map_torch_fx_records_when_generating_code():
    gm, _ = _exported()
    _edit_with_python_op(gm)
    nodes = list(gm.graph.nodes)
    fx_map = {key + gm._prologue_start: nodes[index] for key, index in gm._lineno_map.items() if index is not None}
    ours = line_node_map(gm)
    for line, node in ours.items():
        assert fx_map[line] is node


def test_map_follows_recompiles_and_drops_removed_nodes():
    gm, _ = _exported()
    before = dict(line_node_map(gm))
    scaled = _edit_with_python_op(gm)
    after = line_node_map(gm)
    assert after != before and scaled in after.values()
    scaled.replace_all_uses_with(scaled.args[0])
    gm.graph.erase_node(scaled)
    # Not recompiled yet: forward still runs the code generated from the removed node, so its line keeps it.
    assert scaled in line_node_map(gm).values()
    gm.recompile()
    assert {n.name for n in line_node_map(gm).values()} == {"linear", "relu", "mul", "output"}


def test_lines_without_a_node_give_none_and_bad_input_is_rejected():
    gm, _ = _exported()
    assert recapture_meta(gm, 0) is None
    assert recapture_meta(gm, 10_000) is None
    with pytest.raises(TypeError, match="GraphModule"):
        recapture_meta(torch.nn.Linear(1, 1), 1)


def test_returned_metadata_is_a_copy():
    gm, _ = _exported()
    line = next(line for line, node in line_node_map(gm).items() if node.name == "linear")
    recapture_meta(gm, line)["nn_module_stack"]["other"] = ("x", object)
    assert "other" not in recapture_meta(gm, line)["nn_module_stack"]


def test_is_generated_forward_recognises_the_frame_of_a_graph_module():
    gm, lin = _exported()
    code = type(gm).forward.__code__
    assert is_generated_forward(code, gm)
    assert not is_generated_forward(code, lin)
    assert not is_generated_forward(_exported.__code__, gm)
