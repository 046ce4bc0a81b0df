"""GraphBuilder: nodes, example-value propagation, metadata, names and attribute attachment."""

import operator

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from dynajit.fxgraph import GraphBuilder, format_stack_trace, spelled_as_calls


@pytest.fixture
def mode():
    return FakeTensorMode()


def test_builds_a_graph_module_that_matches_eager(mode):
    lin = torch.nn.Linear(3, 4)
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=mode.from_tensor(torch.randn(2, 3)))
    w = b.get_attr("linear.weight", lin.weight)
    y = b.call_function(torch.matmul, (x, b.call_method("t", (w,))))
    z = b.call_method("relu", (y,))
    m = b.call_module("sub", lin, (x,))
    b.output((z, m))
    gm = b.build()

    inp = torch.randn(2, 3)
    got = gm(inp)
    torch.testing.assert_close(got[0], torch.relu(inp @ lin.weight.t()))
    torch.testing.assert_close(got[1], lin(inp))
    assert isinstance(gm, torch.fx.GraphModule)


@pytest.mark.parametrize("base", [-2, -2.5, -0.0, float("-inf"), 3])
def test_a_power_of_a_number_runs_in_the_graphs_code_as_python_computes_it(mode, base):
    # torch.fx writes operator.pow(-2, x) as "-2 ** x", which Python reads as -(2 ** x)
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=mode.from_tensor(torch.randn(3)))
    b.output(b.call_function(operator.pow, (base, x)))
    gm = b.build()
    inp = torch.tensor([2.0, 3.0, 0.0])
    torch.testing.assert_close(gm(inp), base**inp, equal_nan=True)


def test_spelled_as_calls_mends_the_powers_of_a_graph_made_elsewhere():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output((graph.call_function(operator.pow, (-2, x)), graph.call_function(operator.pow, (x, -2))))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert gm(2.0) == (-4.0, 0.25)  # the code as torch.fx writes it
    assert spelled_as_calls(gm)(2.0) == (4.0, 0.25)
    assert "pow(-2, x)" in gm.code


def test_example_values_are_propagated_on_fake_tensors(mode):
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=mode.from_tensor(torch.randn(2, 3)))
    y = b.call_function(torch.cat, ([x, x],), {"dim": 0})
    s = b.call_method("size", (y, 0))
    first = b.call_function(operator.getitem, (y, (slice(None), 1)))
    split = b.call_function(torch.split, (y, {"a": 2}["a"]))
    total = b.call_function(operator.add, (first, 1.5))
    for node in (y, first, total):
        assert isinstance(node.meta["example_value"], FakeTensor)
        assert node.meta["example_value"].fake_mode is mode
    assert y.meta["example_value"].shape == (4, 3)
    assert s.meta["example_value"] == 4
    assert first.meta["example_value"].shape == (4,)
    assert [t.shape for t in split.meta["example_value"]] == [(2, 3), (2, 3)]


def test_nested_dict_args_are_faked(mode):
    def takes_dict(d, *, scale):
        return d["a"] * scale + d["b"][0]

    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=torch.randn(2))
    out = b.call_function(takes_dict, ({"a": x, "b": [x, 3]},), {"scale": 2.0})
    assert isinstance(out.meta["example_value"], FakeTensor)
    b.output(out)
    inp = torch.randn(2)
    torch.testing.assert_close(b.build()(inp), inp * 3.0)


def test_real_example_values_are_faked_with_the_builder_mode():
    b = GraphBuilder()
    x = b.placeholder("x", example_value=torch.ones(2))
    assert isinstance(x.meta["example_value"], FakeTensor)
    assert x.meta["example_value"].fake_mode is b.fake_mode


def test_adopts_the_mode_of_the_first_fake_value_and_rejects_another(mode):
    b = GraphBuilder()
    b.placeholder("x", example_value=mode.from_tensor(torch.ones(2)))
    assert b.fake_mode is mode
    with pytest.raises(ValueError, match="another FakeTensorMode"):
        b.placeholder("y", example_value=FakeTensorMode().from_tensor(torch.ones(2)))


def test_explicit_example_value_skips_running_the_target(mode):
    def must_not_run(x):
        raise AssertionError("ran")

    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=mode.from_tensor(torch.ones(2)))
    y = b.call_function(must_not_run, (x,), example_value="given")
    assert y.meta["example_value"] == "given"


def test_exceptions_from_the_target_propagate_unchanged(mode):
    class Boom(Exception):
        pass

    def boom(x):
        raise Boom("bad shape")

    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=mode.from_tensor(torch.ones(2, 3)))
    with pytest.raises(Boom, match="bad shape"):
        b.call_function(boom, (x,))
    with pytest.raises(RuntimeError):
        b.call_function(torch.matmul, (x, x))
    assert [n.op for n in b.graph.nodes] == ["placeholder"]


def test_missing_example_value_is_a_clear_error(mode):
    b = GraphBuilder(mode)
    x = b.placeholder("x")
    with pytest.raises(ValueError, match="has no example_value"):
        b.call_function(torch.relu, (x,))


def test_call_module_runs_on_fake_state_and_leaves_the_module_untouched(mode):
    bn = torch.nn.BatchNorm1d(3)
    before = bn.running_mean.clone()
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=mode.from_tensor(torch.randn(4, 3)))
    y = b.call_module("bn", bn, (x,))
    assert isinstance(y.meta["example_value"], FakeTensor)
    assert y.meta["example_value"].shape == (4, 3)
    torch.testing.assert_close(bn.running_mean, before)
    assert not isinstance(bn.weight, FakeTensor)


def test_node_names_are_unique_identifiers_and_deterministic(mode):
    def build():
        b = GraphBuilder(mode)
        x = b.placeholder("L['x']", example_value=torch.ones(2))
        x2 = b.placeholder("L['x']", example_value=torch.ones(2))
        k = b.placeholder("class", example_value=torch.ones(2))
        a = b.call_function(torch.relu, (x,))
        a2 = b.call_function(torch.relu, (x2,))
        n = b.call_method("add", (a, a2), name="my sum")
        b.output((n, k))
        return b.build()

    first, second = build(), build()
    names = [n.name for n in first.graph.nodes]
    assert names == [n.name for n in second.graph.nodes]
    assert len(set(names)) == len(names)
    assert all(name.isidentifier() for name in names)
    assert first.code == second.code
    placeholders = [n for n in first.graph.nodes if n.op == "placeholder"]
    assert [p.target for p in placeholders] == [p.name for p in placeholders]
    out = first(torch.ones(2), torch.full((2,), 2.0), torch.zeros(2))
    torch.testing.assert_close(out[0], torch.full((2,), 3.0))


def test_node_meta_blocks_nest_and_meta_keyword_wins(mode):
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=torch.ones(2))
    stack = {"L__self___block": ("block", torch.nn.Sequential)}
    with b.node_meta(
        stack_trace="outer trace", nn_module_stack=stack, source_fn_stack=[("block", torch.nn.Sequential)]
    ):
        a = b.call_function(torch.relu, (x,))
        with b.node_meta(stack_trace="inner trace"):
            c = b.call_method("neg", (a,))
        d = b.call_function(torch.sin, (c,), meta={"stack_trace": "own", "source_fn_stack": [("d", "explicit")]})
    e = b.call_function(torch.cos, (d,))
    assert a.meta["stack_trace"] == "outer trace"
    assert a.meta["nn_module_stack"] == stack and a.meta["nn_module_stack"] is not stack
    assert a.meta["source_fn_stack"] == [("block", torch.nn.Sequential), ("relu", torch.relu)]
    assert c.meta["stack_trace"] == "inner trace"
    assert c.meta["source_fn_stack"][-1] == ("neg", "neg")
    assert d.meta["stack_trace"] == "own"
    assert d.meta["source_fn_stack"] == [("d", "explicit")]
    assert "stack_trace" not in e.meta and "nn_module_stack" not in e.meta
    assert e.meta["source_fn_stack"] == [("cos", torch.cos)]


def test_call_module_source_fn_is_the_module_class(mode):
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=torch.ones(2, 3))
    y = b.call_module("linear", torch.nn.Linear(3, 1), (x,))
    assert y.meta["source_fn_stack"] == [("linear", torch.nn.Linear)]


def test_attributes_are_attached_as_the_same_objects(mode):
    lin = torch.nn.Linear(2, 2)
    const = torch.arange(2.0)
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=torch.ones(2))
    w = b.get_attr("deep.path.weight", lin.weight)
    c = b.get_attr("const", const)
    m = b.call_module("lin", lin, (x,))
    again = b.get_attr("lin.bias", lin.bias)
    b.output(b.call_function(torch.add, (b.call_function(torch.matmul, (w, x)), c)))
    gm = b.build()
    assert gm.deep.path.weight is lin.weight
    assert gm.lin is lin and gm.lin.bias is lin.bias
    assert gm.const is const
    assert dict(gm.named_buffers())["const"] is const
    assert isinstance(m.meta["example_value"], FakeTensor) and again.op == "get_attr"

    with torch.no_grad():
        lin.weight.add_(1.0)  # training updates are seen by the built module
    inp = torch.randn(2)
    torch.testing.assert_close(gm(inp), lin.weight @ inp + const)


def test_training_through_the_graph_module_updates_the_original_parameters(mode):
    lin = torch.nn.Linear(3, 1)
    b = GraphBuilder(mode)
    x = b.placeholder("x", example_value=torch.ones(4, 3))
    b.output(b.call_method("sum", (b.call_module("lin", lin, (x,)),)))
    gm = b.build()
    opt = torch.optim.SGD(gm.parameters(), lr=0.1)
    before = lin.weight.detach().clone()
    gm(torch.randn(4, 3)).backward()
    opt.step()
    assert not torch.equal(before, lin.weight.detach())


def test_attribute_conflicts_are_rejected(mode):
    lin = torch.nn.Linear(2, 2)
    b = GraphBuilder(mode)
    b.get_attr("w", lin.weight)
    b.get_attr("w", lin.weight)  # the same object again is fine
    with pytest.raises(ValueError, match="different object"):
        b.get_attr("w", lin.bias)
    b.call_module("lin", lin, (), example_value=None)
    with pytest.raises(ValueError, match="conflicts"):
        b.get_attr("lin.weight", torch.nn.Parameter(torch.ones(2, 2)))
    b.get_attr("other.bias", lin.bias)
    with pytest.raises(ValueError, match="conflicts"):
        b.call_module("other", torch.nn.Linear(2, 2), (), example_value=None)
    with pytest.raises(ValueError, match="dotted Python identifiers"):
        b.get_attr("bad name", lin.bias)


def test_bad_calls_are_clear_errors(mode):
    b = GraphBuilder(mode)
    with pytest.raises(ValueError, match="args\\[0\\]"):
        b.call_method("relu", ())
    with pytest.raises(TypeError, match=r"nn\.Module"):
        b.call_module("f", torch.relu, ())
    with pytest.raises(ValueError, match="output\\(\\) before build"):
        b.build()
    b.output(None)
    with pytest.raises(ValueError, match="already called"):
        b.output(None)


def test_format_stack_trace_reads_like_a_traceback():
    text = format_stack_trace([("/m.py", 10, "forward", "y = self.block(x)"), ("/b.py", 3, "forward", "return x + 1")])
    assert text.splitlines() == [
        '  File "/m.py", line 10, in forward',
        "    y = self.block(x)",
        '  File "/b.py", line 3, in forward',
        "    return x + 1",
    ]
