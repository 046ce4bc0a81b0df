"""Training through AOT autograd: forward and backward graphs are both compiled."""

import re

import torch
import torch.nn as nn
import torch.nn.functional as F

from dynajit.inductor_lite import compile_fx, compiled_graphs


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.norm = nn.Linear(12, 32), nn.Linear(32, 5), nn.LayerNorm(32)

    def forward(self, x, target):
        h = self.norm(F.gelu(self.fc1(x)))
        logits = self.fc2(torch.dropout(h, 0.0, True))
        return (F.cross_entropy(logits, target), logits.softmax(-1))


def _grads(model):
    return {name: p.grad.clone() for name, p in model.named_parameters()}


def test_mlp_forward_and_backward_match_eager():
    torch.manual_seed(0)
    eager_model = MLP()
    model = MLP()
    model.load_state_dict(eager_model.state_dict())
    x, target = torch.randn(16, 12), torch.randint(0, 5, (16,))
    loss_ref, probs_ref = eager_model(x, target)
    loss_ref.backward()

    compiled = compile_fx(torch.fx.symbolic_trace(model), [x, target])
    for _step in range(2):  # the second call reuses the compiled graphs
        model.zero_grad()
        loss, probs = compiled(x, target)
        loss.backward()
        torch.testing.assert_close(loss, loss_ref)
        torch.testing.assert_close(probs, probs_ref)
        for name, grad in _grads(eager_model).items():
            torch.testing.assert_close(
                _grads(model)[name], grad, atol=1e-5, rtol=1e-4, msg=lambda m, n=name: f"{n}: {m}"
            )
    graphs = compiled_graphs(compiled)
    assert len(graphs) == 2  # forward and backward (from the loss: the probabilities' gradient is never computed)
    assert all(g.info["kernels"] >= 1 for g in graphs)


def test_input_gradients():
    def fn(x, w):
        return ((x * w).tanh().sum(-1) + x.softmax(-1).amax(-1),)

    x = torch.randn(6, 10, requires_grad=True)
    w = torch.randn(10, requires_grad=True)
    (ref,) = fn(x, w)
    ref.sum().backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    compiled = compile_fx(torch.fx.symbolic_trace(fn), [x, w])
    (out,) = compiled(x, w)
    out.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, gx)
    torch.testing.assert_close(w.grad, gw)


def _two_linear_layers_trained_once():
    """A compiled two-layer network after one training step whose gradients are checked against eager's."""
    torch.manual_seed(0)
    eager_model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 5))
    model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 5))
    model.load_state_dict(eager_model.state_dict())
    x = torch.randn(16, 12)
    eager_model(x).square().sum().backward()
    compiled = compile_fx(torch.fx.symbolic_trace(model), [x])
    compiled(x).square().sum().backward()
    assert _grads(model).keys() == _grads(eager_model).keys()
    for name, grad in _grads(eager_model).items():
        torch.testing.assert_close(_grads(model)[name], grad)
    return compiled


def test_backward_matmuls_take_their_operands_without_general_views():
    """The backward of a linear layer multiplies by the saved weight's transpose (``linear`` on the saved
    tensor) and by transposed buffers (``t()``): no ``torch.as_strided`` is built per call for them, and the
    gradients are eager's."""
    compiled = _two_linear_layers_trained_once()
    backward = compiled_graphs(compiled)[-1].wrapper_source
    assert ".t()" in backward and not re.search(r"(?<![.\w])as_strided\(", backward)


def test_a_weight_is_saved_as_itself_and_its_transpose_made_in_the_backward():
    """Views are recomputed in the backward from their saved bases: the forward returns each weight as it is
    for the backward (an alias of its transpose was made per call), and the gradients are eager's."""
    forward = compiled_graphs(_two_linear_layers_trained_once())[0].wrapper_source
    returned = forward[forward.rindex("return ") :]
    assert "as_strided" not in returned and re.search(r"\barg\d+\b", returned), returned


def test_graphs_compile_without_full_collections_the_lazy_backward_too(monkeypatch):
    """AOT autograd compiles the backward at its first backward call, outside any frame's compile: that compile
    defers full collections as well, and the thresholds come back after it."""
    import gc

    from dynajit.inductor_lite import _compile

    seen = []
    real_compile_graph = _compile.compile_graph

    def recording(graph, inputs, *args, **kwargs):
        seen.append(gc.get_threshold())
        return real_compile_graph(graph, inputs, *args, **kwargs)

    monkeypatch.setattr(_compile, "compile_graph", recording)
    saved = gc.get_threshold()
    gc.set_threshold(500, 7, 9)
    try:
        x, w = torch.randn(5, 3), torch.randn(3, requires_grad=True)
        compiled = compile_fx(torch.fx.symbolic_trace(lambda x, w: ((x * w).sin().sum(),)), [x, w])
        (loss,) = compiled(x, w)
        assert len(seen) == 1 and gc.get_threshold() == (500, 7, 9)  # the backward is not compiled yet
        loss.backward()
        torch.testing.assert_close(w.grad, (x * w).cos().mul(x).sum(0))
        assert seen == [(500, 1 << 30, 1 << 30)] * 2
        assert gc.get_threshold() == (500, 7, 9)
    finally:
        gc.set_threshold(*saved)
