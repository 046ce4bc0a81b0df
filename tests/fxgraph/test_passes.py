"""Passes: each is checked by running the graph before and after it on the same inputs."""

import math
import operator

import pytest
import torch
import torch.fx

from dynajit.fxgraph import (
    GraphBuilder,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    graph_stats,
)


def trace(fn_or_module):
    return torch.fx.symbolic_trace(fn_or_module)


def targets(gm):
    return [node.target for node in gm.graph.nodes if node.op.startswith("call_")]


def assert_same_behaviour(fn, gm, inputs, seed=0):
    """Run eagerly and through gm on equal copies of inputs; compare results, mutated inputs and the RNG stream."""
    eager_in = tuple(t.clone() for t in inputs)
    graph_in = tuple(t.clone() for t in inputs)
    torch.manual_seed(seed)
    want = fn(*eager_in)
    want_next = torch.rand(2)
    torch.manual_seed(seed)
    got = gm(*graph_in)
    got_next = torch.rand(2)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(graph_in, eager_in)
    torch.testing.assert_close(got_next, want_next)


# ------------------------------------------------------------------------------------------ dead code


def test_dce_removes_unused_pure_nodes():
    def fn(x):
        unused = torch.sin(x) * 2
        del unused
        return x.relu()

    gm = trace(fn)
    assert eliminate_dead_code(gm) == 2
    assert targets(gm) == ["relu"]
    assert_same_behaviour(fn, gm, (torch.randn(3),))


def test_dce_keeps_mutations_prints_and_random_draws(capsys):
    def fn(x, buf):
        x.add_(1)
        torch.relu_(buf)
        torch.add(x[:1], 1, out=buf[:1])
        torch.rand_like(x)
        print("side effect")
        return x * 2

    gm = trace(fn)
    assert eliminate_dead_code(gm) == 0
    assert_same_behaviour(fn, gm, (torch.arange(3.0), torch.arange(-2.0, 1.0)))
    assert capsys.readouterr().out.count("side effect") == 2


def test_dce_keeps_an_augmented_assignment_called_by_its_method_name():
    # (``y.__iadd__(1)`` is ``y += 1``: a dunder, yet in place)
    def fn(x):
        y = x * 1
        y.__iadd__(1)
        y.__imul__(3)
        return y

    gm = trace(fn)
    assert eliminate_dead_code(gm) == 0
    assert_same_behaviour(fn, gm, (torch.arange(3.0),))


def test_dce_keeps_item_assignment():
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.zeros(2))
    b.call_function(operator.setitem, (x, 0, 5.0))
    b.output(b.call_function(torch.sin, (x,)))
    gm = b.build()
    assert eliminate_dead_code(gm) == 0
    inp = torch.zeros(2)
    torch.testing.assert_close(gm(inp), torch.sin(torch.tensor([5.0, 0.0])))
    torch.testing.assert_close(inp, torch.tensor([5.0, 0.0]))


def test_dce_keeps_training_modules_that_update_buffers_and_drops_pure_ones():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = torch.nn.BatchNorm1d(3)
            self.lin = torch.nn.Linear(3, 3)
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x):
            self.bn(x)
            self.lin(x)
            self.drop(x)
            return x + 1

    m = M()
    gm = trace(m)
    assert eliminate_dead_code(gm) == 1
    assert targets(gm) == ["bn", "drop", operator.add]
    before = m.bn.running_mean.clone()
    gm(torch.randn(4, 3))
    assert not torch.equal(before, m.bn.running_mean)

    m.eval()
    gm = trace(m)
    assert eliminate_dead_code(gm) == 3
    assert targets(gm) == [operator.add]


def test_dce_on_builder_graph_and_bad_input():
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.ones(2))
    b.call_function(torch.cos, (x,))
    b.output(b.call_function(torch.sin, (x,)))
    gm = b.build()
    assert eliminate_dead_code(gm) == 1
    assert "cos" not in gm.code
    with pytest.raises(TypeError, match="GraphModule"):
        eliminate_dead_code(gm.graph)


# ------------------------------------------------------------------------------------------ CSE


def test_cse_merges_identical_pure_calls():
    def fn(x):
        a = torch.relu(x) + x.sin()
        b = torch.relu(x) + x.sin()
        return a * b

    gm = trace(fn)
    assert eliminate_common_subexpressions(gm) == 3
    assert targets(gm).count(torch.relu) == 1
    assert_same_behaviour(fn, gm, (torch.randn(4),))


def test_cse_never_merges_random_draws_or_across_a_mutation():
    def fn(x):
        r1 = torch.rand_like(x)
        r2 = torch.rand_like(x)
        before = x.sin()
        x.mul_(2)
        after = x.sin()
        return r1 - r2, before + after

    gm = trace(fn)
    assert eliminate_common_subexpressions(gm) == 0
    assert_same_behaviour(fn, gm, (torch.arange(3.0),))


def test_cse_tells_equal_looking_constants_apart():
    def fn(x):
        return x + 1, x + 1.0, x + True, x + 1

    gm = trace(fn)
    assert eliminate_common_subexpressions(gm) == 1
    assert_same_behaviour(fn, gm, (torch.arange(3),))


def test_cse_tells_signed_zeros_apart_and_merges_nan_constants():
    # 0.0 == -0.0 and they hash alike: merged, 1 / (x * -0.0) gave +inf where eager gives -inf.
    def fn(x):
        # (complex constants are left out: torch 2.13's fx writes complex(0.0, -0.0) into its code as -0j)
        return 1 / (x * 0.0), 1 / (x * -0.0), (x + math.nan).isnan(), (x + math.nan).isnan()

    gm = trace(fn)
    assert eliminate_common_subexpressions(gm) == 2  # the second x + nan, and its isnan
    assert_same_behaviour(fn, gm, (torch.arange(1.0, 4.0),))
    got = gm(torch.arange(1.0, 4.0))
    assert got[0].eq(math.inf).all() and got[1].eq(-math.inf).all()


def test_cse_keeps_the_first_nodes_metadata_and_fills_gaps():
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.ones(2))
    first = b.call_function(torch.cos, (x,))
    with b.node_meta(stack_trace="second trace"):
        second = b.call_function(torch.cos, (x,))
    b.output((first, second))
    gm = b.build()
    assert eliminate_common_subexpressions(gm) == 1
    cos = next(n for n in gm.graph.nodes if n.target is torch.cos)
    assert cos.meta["stack_trace"] == "second trace"
    assert cos.meta["source_fn_stack"] == [("cos", torch.cos)]


# ------------------------------------------------------------------------------------------ constant folding


class WithConstants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(9.0).reshape(3, 3))
        self.weight = torch.nn.Parameter(torch.ones(3, 3))

    def forward(self, x):
        scaled = self.table.t() * 2 + torch.arange(3.0).unsqueeze(1)
        rows = self.table.size(0)
        return x @ scaled * rows + x @ self.weight.t()

    def graph(self):
        """The graph capture records for forward (torch.fx's tracer would run the constant part while tracing)."""
        b = GraphBuilder()
        x = b.placeholder("x", example_value=torch.randn(2, 3))
        table = b.get_attr("table", self.table)
        scaled = b.call_function(operator.mul, (b.call_method("t", (table,)), 2))
        column = b.call_method("unsqueeze", (b.call_function(torch.arange, (3.0,)), 1))
        scaled = b.call_function(operator.add, (scaled, column))
        rows = b.call_method("size", (table, 0))
        left = b.call_function(operator.mul, (b.call_function(operator.matmul, (x, scaled)), rows))
        weight_t = b.call_method("t", (b.get_attr("weight", self.weight),))
        b.output(b.call_function(operator.add, (left, b.call_function(operator.matmul, (x, weight_t)))))
        return b.build()


def test_fold_constants_precomputes_constant_subgraphs():
    m = WithConstants()
    gm = m.graph()
    calls_before = graph_stats(gm).calls
    assert fold_constants(gm) > 0
    folded = [n for n in gm.graph.nodes if n.op == "get_attr" and n.target.startswith("_folded_constant_")]
    assert len(folded) == 1
    torch.testing.assert_close(getattr(gm, folded[0].target), m.table.t() * 2 + torch.arange(3.0).unsqueeze(1))
    assert graph_stats(gm).calls == calls_before - 6
    assert "size" not in gm.code  # the folded scalar went into its user's arguments
    assert_same_behaviour(m, gm, (torch.randn(2, 3),))


def test_fold_constants_leaves_parameters_trainable():
    m = WithConstants()
    gm = m.graph()
    fold_constants(gm)
    assert "t" in targets(gm)  # self.weight.t() is recomputed on every call
    with torch.no_grad():
        m.weight.mul_(3)
    assert_same_behaviour(m, gm, (torch.randn(2, 3),))


def test_fold_constants_never_hands_out_a_folded_tensor():
    const = torch.ones(2)
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.zeros(2))
    c = b.get_attr("c", const)
    doubled = b.call_function(operator.mul, (c, 2))
    view = b.call_method("view", (b.call_function(operator.add, (c, 1)), 2, 1))
    b.output((doubled, view, b.call_function(operator.add, (x, 1))))
    gm = b.build()
    fold_constants(gm)
    first, view, _ = gm(torch.zeros(2))
    first.add_(100)
    view.add_(100)
    again, view_again, _ = gm(torch.zeros(2))
    torch.testing.assert_close(again, torch.full((2,), 2.0))
    torch.testing.assert_close(view_again, torch.full((2, 1), 2.0))


def test_fold_constants_skips_random_mutated_and_failing_calls():
    def build(acc):
        b = GraphBuilder()
        x = b.placeholder("x", example_value=torch.ones(2))
        noise = b.call_function(torch.rand, (2,))
        buffer = b.get_attr("acc", acc)
        b.call_method("add_", (buffer, 1))
        grown = b.call_function(operator.mul, (buffer, 1))
        b.call_method("add_", (grown, x))
        bad = b.call_function(torch.matmul, (b.get_attr("bad", torch.ones(2, 3)),) * 2, example_value=None)
        b.output((b.call_function(operator.add, (b.call_function(operator.add, (x, noise)), grown)), bad))
        return b.build()

    gm = build(torch.zeros(2))
    assert fold_constants(gm) == 0
    reference = build(torch.zeros(2))
    for _ in range(2):  # the buffer update must happen on every call
        torch.manual_seed(0)
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            reference(torch.ones(2))
        torch.manual_seed(0)
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            gm(torch.ones(2))
        torch.testing.assert_close(gm.acc, reference.acc)


def test_fold_constants_uses_example_values_to_spot_views():
    const = torch.arange(4.0)
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.ones(4))
    c = b.get_attr("c", const)
    doubled = b.call_function(torch.mul, (c, 2))
    n = b.call_method("size", (x, 0))
    view = b.call_method("view", (doubled, n))
    total = b.call_function(torch.add, (doubled, x))
    b.output((view, total))
    gm = b.build()
    fold_constants(gm)
    assert torch.mul in targets(gm)  # a run-time view of it is returned: folding would share one tensor across calls
    out, _ = gm(torch.ones(4))
    out.add_(1)
    torch.testing.assert_close(gm(torch.ones(4))[0], const * 2)


# ------------------------------------------------------------------------------------------ statistics


def test_graph_stats_counts_by_opcode_and_target():
    gm = WithConstants().graph()
    stats = graph_stats(gm)
    assert stats.by_op == {"placeholder": 1, "get_attr": 2, "call_method": 4, "call_function": 7, "output": 1}
    assert stats.by_target["operator.matmul"] == 2
    assert stats.by_target["torch.arange"] == 1
    assert stats.by_target["t"] == 2
    assert stats.nodes == 15 and stats.calls == 11
    assert str(stats).startswith("15 nodes (placeholder=1")
    assert graph_stats(gm.graph) == stats
    with pytest.raises(TypeError, match="graph_stats"):
        graph_stats(WithConstants())
