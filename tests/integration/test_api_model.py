"""A small model through the public surface end to end: compile with inductor, train a step, explain, pickle."""

from __future__ import annotations

import pickle

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
