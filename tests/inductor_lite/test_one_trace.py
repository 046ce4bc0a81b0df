"""Inference graphs traced to aten once where AOT autograd's first pass would find nothing to act on.

Each case builds a module, traces it with ``torch.fx.symbolic_trace`` (parameters and buffers as attributes, as
capture's graphs hold them) and runs it eagerly and through ``compile_fx`` on clones of the same module and
inputs, comparing outputs, dtypes, shapes and strides, the module's state after the calls, and which outputs
share memory with a parameter or input. It checks which road the graph took (``info["traced_once"]``) and how
many times the caller's graph was run to trace it: once on the one-trace road; three times where the single trace
showed the graph needs AOT autograd, which then runs it twice.
"""

from __future__ import annotations

import copy

import pytest
import torch

from dynajit.inductor_lite import compile_fx, compiled_graphs


class _Fresh(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.norm = torch.nn.LayerNorm(3)
        self.register_buffer("shift", torch.arange(3.0))

    def forward(self, x):
        return (self.norm(self.lin(x)) + self.shift).relu(), x.sum(-1)


class _Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(5, 4)
        self.head = torch.nn.Linear(4, 5, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(self.embed(x) * 2)


class _TrainingBatchNorm(torch.nn.Module):  # writes its running statistics, under no_grad too
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(4))
        self.register_buffer("var", torch.ones(4))

    def forward(self, x):
        return torch.nn.functional.batch_norm(x, self.mean, self.var, training=True, momentum=0.3) * 2


class _WritesABuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count.add_(x.sum() * 0 + 1)  # (an argument the trace records makes the write a node of the graph)
        return x * self.count


class _ReturnsAParameterView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        return self.weight.t(), x @ self.weight


class _ReturnsItsInput(torch.nn.Module):
    def forward(self, x):
        return x, x * 2


def _int_input():
    return torch.tensor([[0, 4, 2], [1, 1, 3]])


CASES = [
    (_Fresh, lambda: torch.randn(2, 5, 4), True),
    (_Tied, _int_input, True),
    (_TrainingBatchNorm, lambda: torch.randn(6, 4), False),
    (_WritesABuffer, lambda: torch.randn(3), False),
    (_ReturnsAParameterView, lambda: torch.randn(2, 4), False),
    (_ReturnsItsInput, lambda: torch.randn(2, 4), False),
]


def _shares(outs, module, x):
    known = [x.untyped_storage().data_ptr(), *(p.untyped_storage().data_ptr() for p in module.parameters())]
    return [known.index(o.untyped_storage().data_ptr()) if o.untyped_storage().data_ptr() in known else None
            for o in outs]  # fmt: skip


def _flat(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _runs_of_the_graph(monkeypatch):
    runs = []
    original = torch.fx.Interpreter.run

    def counted(self, *args, **kwargs):
        runs.append(self.module)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.fx.Interpreter, "run", counted)
    return runs


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
@pytest.mark.parametrize(("build", "make_input", "once"), CASES, ids=[c[0].__name__.strip("_") for c in CASES])
def test_an_inference_graph_is_traced_once_only_where_aot_autograd_would_change_nothing(
    build, make_input, once, mode, monkeypatch
):
    torch.manual_seed(0)
    eager = build()
    compiled_module = copy.deepcopy(eager)
    gm = torch.fx.symbolic_trace(compiled_module)
    x = make_input()
    runs = _runs_of_the_graph(monkeypatch)
    with torch.no_grad() if mode == "no_grad" else torch.inference_mode():
        compiled = compile_fx(gm, [x.clone()])
        traced = len(runs)
        results = [compiled(x.clone()) for _ in range(2)]
        expected = [eager(x.clone()) for _ in range(2)]
    for got, want in zip(results, expected):
        got, want = _flat(got), _flat(want)
        torch.testing.assert_close(got, want)
        assert [(o.dtype, o.shape, o.stride()) for o in got] == [(o.dtype, o.shape, o.stride()) for o in want]
    torch.testing.assert_close(dict(gm.state_dict()), dict(eager.state_dict()))
    x = make_input()
    with torch.no_grad() if mode == "no_grad" else torch.inference_mode():
        got, want = _flat(compiled(x)), _flat(eager(x))
    assert _shares(got, gm, x) == _shares(want, eager, x)
    assert bool(compiled_graphs(compiled)[-1].info.get("traced_once")) is once
    assert traced == (1 if once else 3)


def _fresh_pair():
    """A module, its traced copy and an input."""
    torch.manual_seed(0)
    eager = _Fresh()
    return eager, torch.fx.symbolic_trace(copy.deepcopy(eager)), torch.randn(2, 5, 4)


def test_with_grad_on_and_parameters_requiring_it_the_graph_goes_through_aot_autograd():
    eager, gm, x = _fresh_pair()
    compiled = compile_fx(gm, [x])
    got, want = compiled(x), eager(x)
    torch.testing.assert_close(tuple(got), want)
    (got[0].sum() + got[1].sum()).backward()
    (want[0].sum() + want[1].sum()).backward()
    torch.testing.assert_close([p.grad for p in gm.parameters()], [p.grad for p in eager.parameters()])
    assert not any(g.info.get("traced_once") for g in compiled_graphs(compiled))


def test_a_graph_traced_once_reads_its_parameters_as_they_are_at_each_call():
    eager, gm, x = _fresh_pair()
    with torch.no_grad():
        compiled = compile_fx(gm, [x])
        compiled(x)
        for module in (eager, gm):
            module.lin.weight.mul_(3)
            module.shift.data = torch.full((3,), 2.0)
        torch.testing.assert_close(tuple(compiled(x)), eager(x))
    assert compiled_graphs(compiled)[-1].info.get("traced_once")


def test_a_graph_the_single_trace_cannot_take_is_compiled_through_aot_autograd(monkeypatch):
    from dynajit.inductor_lite import _one_trace

    def refuse(*args, **kwargs):
        raise RuntimeError("refused")

    monkeypatch.setattr(_one_trace, "make_fx", refuse)
    eager, gm, x = _fresh_pair()
    with torch.no_grad():
        compiled = compile_fx(gm, [x])
        torch.testing.assert_close(tuple(compiled(x)), eager(x))
    assert not compiled_graphs(compiled)[-1].info.get("traced_once")


# ------------------------------------------------------------------ traced as written where nothing is written


class _Flattening(torch.fx.Tracer):
    """Traces through every module to functions of parameters, as capture's graphs hold them."""

    def is_leaf_module(self, m, name):
        return False


def _flat_trace(module):
    return torch.fx.GraphModule(module, _Flattening().trace(module))


class _Pooled(torch.nn.Module):  # adaptive_avg_pool1d's decomposition restrides its result in place
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.nn.functional.adaptive_avg_pool1d(self.lin(x).transpose(1, 2), 1).flatten(1).relu()


class _WritesThroughAnAtenOp(torch.nn.Module):  # a write only the aten graph shows
    def forward(self, x):
        return torch.ops.aten.add_.Tensor(x * 2, x).relu()


class _Plain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.token = torch.nn.Parameter(torch.randn(1, 1, 4))
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cat([self.token.expand(x.shape[0], -1, -1), self.lin(x).relu()], 1).softmax(-1)


class _WritesAnIntermediate(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y.add_(1)
        return y.relu()


def _traces(monkeypatch):
    """The kinds of trace ``compile_fx`` makes: "functional" or "as written"."""
    from dynajit.inductor_lite import _one_trace

    made = []
    functionalize = torch.func.functionalize
    make_fx = _one_trace.make_fx

    def marked_functionalize(fn, **kwargs):
        functional = functionalize(fn, **kwargs)
        functional.functionalized = True
        return functional

    def counted_make_fx(fn, *args, **kwargs):
        made.append("functional" if getattr(fn, "functionalized", False) else "as written")
        return make_fx(fn, *args, **kwargs)

    monkeypatch.setattr(torch.func, "functionalize", marked_functionalize)
    monkeypatch.setattr(_one_trace, "make_fx", counted_make_fx)
    return made


@pytest.mark.parametrize(
    ("build", "kinds", "once"),
    [
        (_Plain, ["as written"], True),
        (_WritesAnIntermediate, ["functional"], True),
        (_WritesThroughAnAtenOp, ["as written", "functional"], True),
        (_Pooled, ["as written"], False),
    ],
    ids=["writes_nothing", "writes_an_intermediate", "an_aten_op_writes", "restrides_in_place"],
)
def test_a_graph_that_writes_nothing_is_traced_as_written_and_one_that_writes_is_functionalized(
    build, kinds, once, monkeypatch
):
    """Functionalization changes nothing where nothing is written: such a graph is traced as written. A write the
    torch-level graph shows is functionalized at once; one only its aten graph shows is traced again,
    functionalized. An in-place view op (``as_strided_`` in ``adaptive_avg_pool1d``'s decomposition) stays in a
    functionalized graph too: that graph goes to AOT autograd at once."""
    torch.manual_seed(0)
    eager = build()
    gm = _flat_trace(copy.deepcopy(eager))
    x = torch.randn(2, 3, 4)
    made = _traces(monkeypatch)
    with torch.no_grad():
        compiled = compile_fx(gm, [x.clone()])
        got, want = compiled(x.clone()), eager(x.clone())
    torch.testing.assert_close(got, want)
    assert (got.shape, got.stride(), got.requires_grad) == (want.shape, want.stride(), want.requires_grad)
    assert made == kinds
    assert bool(compiled_graphs(compiled)[-1].info.get("traced_once")) is once


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
@pytest.mark.parametrize(("build", "make_input", "once"), CASES, ids=[c[0].__name__.strip("_") for c in CASES])
def test_a_graph_of_functions_of_parameters_is_traced_once_only_where_aot_autograd_would_change_nothing(
    build, make_input, once, mode
):
    """The cases above, traced through their modules: no node is a module call, so a graph that writes nothing
    is traced as written."""
    torch.manual_seed(0)
    eager = build()
    gm = _flat_trace(copy.deepcopy(eager))
    x = make_input()
    with torch.no_grad() if mode == "no_grad" else torch.inference_mode():
        compiled = compile_fx(gm, [x.clone()])
        results = [_flat(compiled(x.clone())) for _ in range(2)]
        expected = [_flat(eager(x.clone())) for _ in range(2)]
    for got, want in zip(results, expected):
        torch.testing.assert_close(got, want)
        assert [(o.dtype, o.shape, o.stride()) for o in got] == [(o.dtype, o.shape, o.stride()) for o in want]
    state = eager.state_dict()  # (the traced copy holds a tied parameter once)
    torch.testing.assert_close(dict(gm.state_dict()), {name: state[name] for name in gm.state_dict()})
    assert bool(compiled_graphs(compiled)[-1].info.get("traced_once")) is once
