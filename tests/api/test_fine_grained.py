"""The fine-grained tracing APIs, mirroring the examples of the fine-grained tracing documentation.

Each test runs the same code eagerly and compiled, compares the results, and
looks at the graphs the counting backend received to see what was traced.
The functions are module-level, as in the documentation's examples. Tests of
behaviour capture does not implement yet are expected failures naming the gap
(not strict, so capture implementing it does not break this suite; they then
show as XPASS and the mark should go).
"""

from __future__ import annotations

import functools
import operator
import types

import pytest
import torch

import dynajit.capture as capture
from dynajit import _dynamo, compiler
from dynajit.capture.testing import CompileCounter


@pytest.fixture(autouse=True)
def fresh_cache():
    compiler.reset()
    yield
    compiler.reset()


def graph_targets(counter: CompileCounter) -> list[object]:
    return [node.target for gm in counter.graphs for node in gm.graph.nodes if node.op == "call_function"]


def run_both(fn, *args, **compile_kwargs):
    counter = CompileCounter()
    compiled = compiler.compile(fn, backend=counter, **compile_kwargs)
    torch.testing.assert_close(compiled(*args), fn(*args))
    return counter


# disable ----------------------------------------------------------------------------------


def cos_callee(x):
    return torch.cos(x)


@compiler.disable
def eager_part(x):
    return cos_callee(x) + torch.sin(x)


def uses_eager_part(x):
    y = torch.relu(x) * 2
    return eager_part(y) - 1


def test_disable_runs_the_function_and_its_callees_eagerly():
    counter = run_both(uses_eager_part, torch.randn(4))
    targets = graph_targets(counter)
    assert torch.relu in targets
    assert torch.cos not in targets and torch.sin not in targets
    assert counter.frame_count == 2  # before and after the disabled call


def plus_one_callee(x):
    return torch.cos(x) + 1


def driver(x):
    return plus_one_callee(torch.sin(x))


def test_disable_with_recursive_false_still_compiles_the_callees():
    counter = CompileCounter()
    compiled = compiler.compile(compiler.disable(driver, recursive=False), backend=counter)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), driver(x))
    targets = graph_targets(counter)
    assert torch.cos in targets  # the callee was compiled
    assert torch.sin not in targets  # the driver's own frame was not


def test_disable_as_a_call_returns_a_function_that_compiled_code_leaves_alone():
    def traced_twice(x):
        return torch.tanh(x) * 2

    disabled = compiler.disable(traced_twice)
    x = torch.randn(3)
    torch.testing.assert_close(disabled(x), traced_twice(x))
    counter = CompileCounter()
    torch.testing.assert_close(compiler.compile(disabled, backend=counter)(x), traced_twice(x))
    assert counter.frame_count == 0


class Scaler:
    """Marks on methods apply to every instance, whether the method is called bound or through the class."""

    @compiler.disable
    def eager_scale(self, x):
        return x * (2 if compiler.is_compiling() else 3)  # 3 eagerly: a disabled method is never traced

    @compiler.allow_in_graph
    def opaque_scale(self, x):
        return x * 5

    def run(self, x):
        return self.eager_scale(torch.relu(x)) + Scaler.eager_scale(self, x)

    def run_opaque(self, x):
        return self.opaque_scale(x) + 1


def test_a_method_marked_disable_runs_in_python_when_called_bound():
    counter = run_both(Scaler().run, torch.randn(4))
    assert torch.relu in graph_targets(counter)
    assert all(node.target is not operator.mul for gm in counter.graphs for node in gm.graph.nodes)


def test_a_method_marked_allow_in_graph_is_not_traced_into_when_called_bound():
    """Its ``self``, a plain object, cannot be a graph node's argument: the call runs in Python, and says why."""
    run_both(Scaler().run_opaque, torch.randn(4))
    explained = compiler.explain(Scaler().run_opaque)(torch.randn(4))
    assert [r.reason for r in explained.break_reasons] == ["passing UserObjectVar(Scaler) to a torch operation"]


@compiler.disable
def disabled_scale(x, k=1):
    return x * (2 if compiler.is_compiling() else 3) * k  # 3 eagerly: a disabled function is never traced


class Scaled(torch.nn.Module):
    def forward(self, x):
        return x * (2 if compiler.is_compiling() else 3)


class DisabledForward(torch.nn.Module):
    @compiler.disable
    def forward(self, x):
        return x * (2 if compiler.is_compiling() else 3)


class HoldsDisabledModules(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.by_class = DisabledForward()
        self.by_instance = compiler.disable(Scaled())

    def forward(self, x):
        return self.by_class(torch.relu(x)) + self.by_instance(x) * 10


def calls_disabled_indirectly(x):
    halved = functools.partial(disabled_scale, k=0.5)
    return halved(x) + sum(map(disabled_scale, [x, x * 2])) + sorted([x], key=lambda t: 0)[0]


@pytest.mark.parametrize("program", ["partial_and_map", "modules"])
def test_disable_holds_however_the_function_or_module_is_called(program):
    # A disabled function reached through functools.partial or map, a submodule whose class's forward is
    # disabled, and a module instance marked disable() were traced: is_compiling() answered True inside.
    if program == "modules":
        fn, x = HoldsDisabledModules(), torch.randn(4)
    else:
        fn, x = calls_disabled_indirectly, torch.randn(4)
    counter = run_both(fn, x)
    assert program != "modules" or torch.relu in graph_targets(counter)


@torch._disable_dynamo
def torch_disabled_scale(x):
    return x * (2 if compiler.is_compiling() else 3)


def test_a_function_torch_marks_with_disable_dynamo_runs_in_python_with_that_reason():
    """``torch._disable_dynamo`` is how torch keeps ``Optimizer.zero_grad`` and ``checkpoint`` out of graphs."""

    def calls_torch_disabled(x):
        return torch_disabled_scale(torch.relu(x)) - 1

    counter = run_both(calls_torch_disabled, torch.randn(4))
    assert torch.relu in graph_targets(counter) and counter.frame_count == 2
    explained = compiler.explain(calls_torch_disabled)(torch.randn(4))
    assert [r.reason for r in explained.break_reasons] == [
        "torch_disabled_scale is marked by torch with torch._disable_dynamo: it runs in Python"
    ]


# disallow_in_graph / allow_in_graph ---------------------------------------------------------


def add_sub_add(x):
    x = torch.add(x, 1)
    x = torch.sub(x, 1)
    return torch.add(x, 1)


def test_disallow_in_graph_makes_an_op_a_graph_break_and_allow_in_graph_undoes_it():
    x = torch.randn(3)
    _dynamo.disallow_in_graph(torch.sub)
    try:
        counter = run_both(add_sub_add, x)
        assert counter.frame_count == 2
        assert torch.sub not in graph_targets(counter)
    finally:
        compiler.allow_in_graph(torch.sub)
    compiler.reset()
    counter = run_both(add_sub_add, x)
    assert counter.frame_count == 1
    assert torch.sub in graph_targets(counter)


def test_disallow_in_graph_on_a_user_function_suggests_disable_or_graph_break():
    with pytest.raises(ValueError, match=r"disable.*graph_break"):
        _dynamo.disallow_in_graph(cos_callee)


def black_box(x, y):
    seen = {id(x), id(y)}  # capture cannot trace id(), but the call is opaque and runs on fake tensors
    return torch.sin(x) * y if len(seen) == 2 else torch.cos(y)


def uses_black_box(x, y):
    return black_box(x + 1, y) * 2


def first_step(x):
    return x + 1


def second_step(x):
    return x * 2


def uses_both_steps(x):
    return second_step(first_step(x))


def test_allow_in_graph_puts_one_opaque_call_function_node_with_the_function_as_target():
    assert compiler.allow_in_graph(black_box) is black_box
    counter = run_both(uses_black_box, torch.ones(3), torch.randn(3))
    assert counter.frame_count == 1
    nodes = [node for node in counter.graphs[0].graph.nodes if node.target is black_box]
    assert len(nodes) == 1 and nodes[0].op == "call_function"
    assert torch.sin not in graph_targets(counter)  # not traced into
    assert tuple(nodes[0].meta["example_value"].shape) == (3,)


def test_allow_in_graph_accepts_a_list_and_returns_it():
    functions = [first_step, second_step]
    assert compiler.allow_in_graph(functions) is functions
    counter = run_both(uses_both_steps, torch.randn(2))
    assert first_step in graph_targets(counter) and second_step in graph_targets(counter)


# graph_break -----------------------------------------------------------------------------


def sin_break_cos(x):
    x = torch.sin(x)
    _dynamo.graph_break()
    return torch.cos(x)


def test_graph_break_cuts_the_graph_and_is_a_no_op_eagerly():
    counter = run_both(sin_break_cos, torch.randn(3))
    assert counter.frame_count == 2
    assert [graph_targets(counter)[0], graph_targets(counter)[-1]] == [torch.sin, torch.cos]
    assert _dynamo.graph_break() is None


# is_compiling ----------------------------------------------------------------------------


def branches_on_is_compiling(x):
    if compiler.is_compiling():
        return x + 1
    return x - 1


def reports_tracer(x):
    return x + (10 if compiler.is_exporting() else 0) + (1 if compiler.is_dynamo_compiling() else 0)


def test_is_compiling_is_true_under_tracing_and_false_eagerly():
    x = torch.zeros(2)
    assert not compiler.is_compiling() and not compiler.is_dynamo_compiling() and not compiler.is_exporting()
    torch.testing.assert_close(branches_on_is_compiling(x), x - 1)
    torch.testing.assert_close(compiler.compile(branches_on_is_compiling, backend="eager")(x), x + 1)


def builds_its_mask_only_eagerly(x, mask=None):
    # transformers' encoder stacks: "if attention_mask is None and not is_torchdynamo_compiling()"
    y = x * 2
    if mask is None and not compiler.is_compiling():
        mask = torch.ones(x.shape[0])
    return y + mask[:, None]


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_trace_that_raises_after_asking_whether_it_is_compiling_runs_in_python(backend):
    # The trace skipped the mask and raised on None[:, None]: the compiled call raised TypeError where eager
    # returns (switch_transformers, longt5). TorchDynamo runs such a frame eagerly, where the answer is False.
    x = torch.randn(3, 2)
    compiled = compiler.compile(builds_its_mask_only_eagerly, backend=backend)
    torch.testing.assert_close(compiled(x), builds_its_mask_only_eagerly(x))
    torch.testing.assert_close(compiled(x, torch.zeros(3)), builds_its_mask_only_eagerly(x, torch.zeros(3)))
    with pytest.raises(TypeError, match="not subscriptable"):  # fullgraph cannot run it in Python: eager's error
        compiler.compile(builds_its_mask_only_eagerly, backend=backend, fullgraph=True)(x)


def test_is_dynamo_compiling_under_capture_and_is_exporting_only_under_export():
    x = torch.zeros(2)
    torch.testing.assert_close(compiler.compile(reports_tracer, backend="eager")(x), x + 1)
    exported = _dynamo.export(reports_tracer)(x)
    torch.testing.assert_close(exported.graph_module(x), x + 11)


# nonstrict_trace -------------------------------------------------------------------------


@_dynamo.nonstrict_trace
def breaks_inside(x):
    _dynamo.graph_break()
    return torch.sin(x) + 1


def calls_nonstrict(x):
    return breaks_inside(x * 2) - 1


def breaks_inside_too(x):
    _dynamo.graph_break()
    return torch.cos(x)


def calls_nonstrict_inline(x):
    return _dynamo.nonstrict_trace(breaks_inside_too)(x) * 3


def test_nonstrict_trace_lets_fullgraph_succeed_over_a_graph_break_inside():
    counter = run_both(calls_nonstrict, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1
    assert torch.sin in graph_targets(counter)


def test_nonstrict_trace_inline_form():
    counter = run_both(calls_nonstrict_inline, torch.randn(3), fullgraph=True)
    assert counter.frame_count == 1


# assume_constant_result ------------------------------------------------------------------

SCALE = {"value": 3}
SCALE_CALLS = []


@compiler.assume_constant_result
def current_scale():
    SCALE_CALLS.append(1)
    return SCALE["value"]


def scaled(x):
    return x * current_scale()


def test_assume_constant_result_is_called_once_and_baked_in():
    x = torch.ones(2)
    SCALE["value"], SCALE_CALLS[:] = 3, []
    counter = CompileCounter()
    compiled = compiler.compile(scaled, backend=counter)
    torch.testing.assert_close(compiled(x), x * 3)
    assert SCALE_CALLS == [1]  # once, at trace time
    SCALE["value"] = 5
    torch.testing.assert_close(compiled(x), x * 3)  # the baked constant, no re-read, no recompile
    assert SCALE_CALLS == [1] and counter.frame_count == 1


PROBES = []


def _marked_by_hand(fn):
    # transformers' own spelling of assume_constant_result (it must not import torch): TorchDynamo's attribute
    fn._dynamo_marked_constant = True
    return fn


@functools.lru_cache
@_marked_by_hand
def install_probe():
    PROBES.append(vars(types.SimpleNamespace(found=True)))  # (vars() is not traced: a break if inlined)
    return 2


def probes_an_install(x):
    return x * install_probe()


def test_a_function_carrying_torchdynamos_constant_mark_under_a_cache_is_called_once_and_baked_in():
    # transformers' is_torch_distributed_available (lru_cache over the mark) was inlined: it read package
    # metadata at every trace, and its vars() call broke nllb-moe's graph eleven times.
    x = torch.ones(2)
    install_probe.cache_clear()
    PROBES.clear()
    counter = CompileCounter()
    with capture.observe() as seen:
        torch.testing.assert_close(compiler.compile(probes_an_install, backend=counter)(x), x * 2)
    assert not [b for frame in seen.frames for b in frame.graph_breaks]
    assert len(PROBES) == 1 and counter.frame_count == 1


def branches_on_private_is_compiling(x):
    return x + 1 if _dynamo.is_compiling() else x - 1


def test_the_private_is_compiling_alias_is_answered_while_tracing():
    x = torch.zeros(2)
    torch.testing.assert_close(branches_on_private_is_compiling(x), x - 1)
    torch.testing.assert_close(compiler.compile(branches_on_private_is_compiling, backend="eager")(x), x + 1)
