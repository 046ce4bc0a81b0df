"""``OptimizedModule``'s transparency, checked with a recording decorator in place of capture.

The decorator records which forward functions were compiled and every call made
through them, so these tests see exactly when the wrapper goes through the
compiled path. Whole-flow tests with capture live in test_module_compiled.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from dynajit.compiler._compile import CompileSettings
from dynajit.compiler._module import OptimizedModule


class Recorder:
    def __init__(self):
        self.compiled = []
        self.calls = 0

    def __call__(self, forward):
        self.compiled.append(forward)

        def run(*args, **kwargs):
            self.calls += 1
            return forward(*args, **kwargs)

        return run


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)
        self.norm = torch.nn.BatchNorm1d(2)
        self.register_buffer("offset", torch.ones(2))
        self.scale = 2.0

    def forward(self, x, *, shift=0.0):
        return self.norm(self.linear(x)) * self.scale + self.offset + shift

    def describe(self):
        return f"Net(scale={self.scale})"


def wrap(module):
    recorder = Recorder()
    return OptimizedModule(module, CompileSettings(backend="eager"), recorder), recorder


def test_calls_run_the_compiled_forward_with_args_and_kwargs():
    net = Net().eval()
    wrapped, recorder = wrap(net)
    x = torch.randn(4, 3)
    torch.testing.assert_close(wrapped(x, shift=1.0), net(x, shift=1.0))
    assert recorder.calls == 1 and len(recorder.compiled) == 1
    wrapped(x)
    assert len(recorder.compiled) == 1  # compiled once, reused


def test_attributes_methods_and_parameters_are_the_originals():
    net = Net()
    wrapped, _ = wrap(net)
    assert isinstance(wrapped, torch.nn.Module)
    assert wrapped._orig_mod is net
    assert wrapped.linear is net.linear
    assert wrapped.scale == 2.0
    assert wrapped.describe() == "Net(scale=2.0)"
    assert [id(p) for p in wrapped.parameters()] == [id(p) for p in net.parameters()]
    assert "describe" in dir(wrapped)
    with pytest.raises(AttributeError):
        wrapped.no_such_attribute


def test_repr_shows_the_original():
    net = Net()
    wrapped, _ = wrap(net)
    assert repr(net) in repr(wrapped)
    assert repr(wrapped).startswith("OptimizedModule(")


def test_state_dict_keys_are_exactly_the_originals_and_load_back():
    net = Net()
    wrapped, _ = wrap(net)
    assert list(wrapped.state_dict()) == list(net.state_dict())
    other = Net()
    with torch.no_grad():
        other.linear.weight.fill_(0.5)
    wrapped.load_state_dict(other.state_dict())
    torch.testing.assert_close(net.linear.weight, other.linear.weight)
    with pytest.raises(RuntimeError, match="Unexpected key"):
        wrapped.load_state_dict({**other.state_dict(), "extra": torch.zeros(1)})


def test_state_dict_of_a_parent_holding_a_wrapped_child_round_trips():
    parent = torch.nn.Sequential(Net())
    parent[0] = wrap(parent[0])[0]
    plain = torch.nn.Sequential(Net())
    assert list(parent.state_dict()) == list(plain.state_dict())
    parent.load_state_dict(plain.state_dict())
    torch.testing.assert_close(parent[0].linear.bias, plain[0].linear.bias)


def test_train_eval_and_to_reach_the_original():
    net = Net()
    wrapped, _ = wrap(net)
    assert wrapped.eval() is wrapped
    assert not net.training and not net.norm.training and not wrapped.training
    wrapped.train()
    assert net.training and net.norm.training
    wrapped.to(torch.float64)
    assert net.linear.weight.dtype == torch.float64


def test_replacing_forward_on_the_original_compiles_the_new_forward():
    net = Net().eval()
    wrapped, recorder = wrap(net)
    x = torch.randn(2, 3)
    wrapped(x)
    net.forward = lambda x, **kwargs: x * 3
    torch.testing.assert_close(wrapped(x), x * 3)
    assert len(recorder.compiled) == 2


def test_forward_hooks_of_the_original_run_around_the_compiled_forward():
    net = Net().eval()
    wrapped, recorder = wrap(net)
    seen = []
    net.register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    net.register_forward_pre_hook(lambda module, args, kwargs: seen.append(dict(kwargs)), with_kwargs=True)
    net.register_forward_hook(lambda module, args, output: output + 100)
    x = torch.randn(2, 3)
    torch.testing.assert_close(wrapped(x, shift=1.0), net(x, shift=1.0))
    assert recorder.calls == 1
    assert seen == [{"shift": 1.0}, {"shift": 1.0}]


def _backward_hooks_seen(call: Callable[[torch.nn.Module], Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """What a module's full backward hook and backward pre-hook receive, and the input's gradient, when
    ``call(module)`` runs the module and a backward (the pre-hook scales the output's gradient by 3)."""
    net = Net()
    torch.manual_seed(0)
    for parameter in net.parameters():
        torch.nn.init.normal_(parameter)
    grads_in, grads_out = [], []
    net.register_full_backward_pre_hook(lambda module, grad_out: (grad_out[0] * 3,))

    def record(module: torch.nn.Module, grad_in: Any, grad_out: Any) -> None:
        grads_in.append(grad_in)
        grads_out.append(grad_out)

    net.register_full_backward_hook(record)
    x = torch.randn(2, 3, requires_grad=True)
    call(net)(x).sum().backward()
    return grads_in, grads_out, [x.grad]


def test_full_backward_hooks_of_the_original_run_as_in_eager():
    eager = _backward_hooks_seen(lambda net: net)
    compiled = _backward_hooks_seen(lambda net: wrap(net)[0])
    assert len(eager[0]) == len(compiled[0]) == 1
    torch.testing.assert_close(compiled, eager)


def test_deprecated_backward_hooks_are_refused_with_a_clear_error():
    net = Net()
    wrapped, _ = wrap(net)
    net.register_backward_hook(lambda module, grad_in, grad_out: None)
    with pytest.raises(NotImplementedError, match="register_full_backward_hook"):
        wrapped(torch.randn(2, 3))


def test_wrapping_a_non_module_is_an_error():
    with pytest.raises(TypeError, match=r"wraps an nn\.Module"):
        OptimizedModule(lambda x: x, CompileSettings(), Recorder())


def test_setting_and_deleting_attributes_reach_the_original():
    net = Net().eval()
    wrapped, _ = wrap(net)
    wrapped.scale = 5.0
    assert net.scale == 5.0 and "scale" not in vars(wrapped)
    x = torch.randn(2, 3)
    torch.testing.assert_close(wrapped(x), net(x))
    wrapped.linear = torch.nn.Linear(3, 2)
    assert wrapped.linear is net.linear
    wrapped.extra = 1
    del wrapped.extra
    assert not hasattr(net, "extra")


def _outcome(action):
    try:
        return "ok", action()
    except Exception as exc:  # the same exception type as the original module raises
        return type(exc).__name__, None


CONTAINERS = [
    lambda: torch.nn.ModuleList(),
    lambda: torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Tanh()]),
    lambda: torch.nn.Sequential(),
    lambda: torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()),
    lambda: torch.nn.ModuleDict(),
    lambda: torch.nn.ModuleDict({"a": torch.nn.ReLU()}),
    lambda: torch.nn.ParameterList([torch.nn.Parameter(torch.ones(1))]),
    lambda: torch.nn.Linear(2, 2),
]


@pytest.mark.parametrize("make", CONTAINERS)
def test_container_protocols_are_the_originals(make):
    """bool, len, iteration, ``in`` and indexing answer as the module itself (or raise its TypeError)."""
    import dynajit.compiler

    module = make()
    wrapped = dynajit.compiler.compile(module, backend="eager")
    assert bool(wrapped) == bool(module)
    assert _outcome(lambda: len(wrapped)) == _outcome(lambda: len(module))
    assert _outcome(lambda: list(wrapped)) == _outcome(lambda: list(module))
    assert _outcome(lambda: "a" in wrapped) == _outcome(lambda: "a" in module)
    key = "a" if isinstance(module, torch.nn.ModuleDict) else 0
    assert _outcome(lambda: wrapped[key]) == _outcome(lambda: module[key])
    # torch.compile's own wrapper sizes containers as they are (our bool also holds for modules without len)
    reference = torch.compile(module, backend="eager")
    if hasattr(type(module), "__len__"):
        assert (bool(wrapped), len(wrapped)) == (bool(reference), len(reference))


def test_setting_and_deleting_items_reach_the_original_container():
    import dynajit.compiler

    layers = torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.Tanh()])
    wrapped = dynajit.compiler.compile(layers, backend="eager")
    sigmoid = torch.nn.Sigmoid()
    wrapped[0] = sigmoid
    assert layers[0] is sigmoid and wrapped[0] is sigmoid
    del wrapped[1]
    assert len(layers) == 1 and len(wrapped) == 1
    assert list(wrapped.parameters()) == list(layers.parameters())


def test_a_compiled_sequential_indexed_and_iterated_runs_the_original_layers():
    import dynajit.compiler

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    wrapped = dynajit.compiler.compile(model, backend="eager")
    x = torch.randn(3, 4)
    assert [type(m) for m in wrapped] == [torch.nn.Linear, torch.nn.ReLU]
    assert isinstance(wrapped[:1], torch.nn.Sequential)
    torch.testing.assert_close(wrapped(x), model(x))
    torch.testing.assert_close(wrapped[0](x), model[0](x))
