"""A small model through the public surface end to end: compile with inductor, train a step, explain, pickle."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from dynajit import compiler


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 8)
        self.norm = torch.nn.LayerNorm(8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x))))


def test_compiled_model_matches_eager_forward_and_backward():
    torch.manual_seed(0)
    eager = TinyNet()
    compiled_source = TinyNet()
    compiled_source.load_state_dict(eager.state_dict())
    compiled = compiler.compile(compiled_source)
    x = torch.randn(4, 6)
    eager_out, compiled_out = eager(x), compiled(x)
    torch.testing.assert_close(compiled_out, eager_out)
    eager_out.square().sum().backward()
    compiled_out.square().sum().backward()
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, msg=name)
    assert list(compiled.state_dict()) == list(eager.state_dict())

    restored = pickle.loads(pickle.dumps(compiled))
    torch.testing.assert_close(restored(x), compiled(x))


def test_explain_and_force_eager_on_a_model():
    net = TinyNet().eval()
    report = compiler.explain(net)(torch.randn(2, 6))
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert report.op_count >= 4
    assert "Graph count: 1" in str(report)
    compiled = compiler.compile(net, backend="eager")
    with compiler.set_stance("force_eager"):
        torch.testing.assert_close(compiled(torch.ones(1, 6)), net(torch.ones(1, 6)))


class Tagger(torch.nn.Module):
    def __init__(self, cell: type) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(8, 8)
        self.rnn = cell(8, 16, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(torch.tanh(self.embed(x)))[0]).log_softmax(-1)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a backend failure would fall back to eager with a warning
@pytest.mark.parametrize("cell", [torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN])
@pytest.mark.parametrize("whole", [False, True], ids=["inside_a_model", "compiled_directly"])
def test_recurrent_modules_run_eagerly_and_train_like_eager(cell, whole):
    torch.manual_seed(0)
    eager = cell(8, 16, num_layers=2, batch_first=True) if whole else Tagger(cell)
    mirror = copy.deepcopy(eager)
    compiled = compiler.compile(mirror)
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(compiled.eval()(x), eager.eval()(x))
    eager_out, compiled_out = eager.train()(x), compiled.train()(x)
    torch.testing.assert_close(compiled_out, eager_out)
    (eager_out[0] if whole else eager_out).sum().backward()
    (compiled_out[0] if whole else compiled_out).sum().backward()
    for (name, p_eager), p_compiled in zip(eager.named_parameters(), mirror.parameters()):
        torch.testing.assert_close(p_compiled.grad, p_eager.grad, msg=name)
    if not whole:
        reasons = [str(r) for r in compiler.explain(Tagger(cell))(x).break_reasons]
        assert any(f"{cell.__name__} modules run eagerly" in r for r in reasons), reasons
