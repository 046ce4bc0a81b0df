"""``tensor.data = other`` in one graph under both backends: parameters clamped through ``.data`` in a training
step, and a tensor given a new size, against eager on the same inputs."""

from __future__ import annotations

import pytest
import torch

from dynajit import compiler


class _Clamped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)

    def forward(self, x):
        loss = self.lin(x).square().mean()
        with torch.no_grad():
            for p in self.lin.parameters():
                p.data = p.data.clamp(-0.1, 0.1)
        return loss


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_parameters_clamped_through_data_match_eager_over_steps(backend):
    torch.manual_seed(0)
    eager, twin = _Clamped(), _Clamped()
    twin.load_state_dict(eager.state_dict())
    compiled = compiler.compile(twin, backend=backend)
    for step in range(3):
        x = torch.randn(4, 5, generator=torch.Generator().manual_seed(step))
        for model, run in ((eager, eager), (twin, compiled)):
            model.zero_grad()
            run(x).backward()
        for got, want in zip(twin.parameters(), eager.parameters()):
            torch.testing.assert_close(got.detach(), want.detach())
            torch.testing.assert_close(got.grad, want.grad)


def _regrow(w, x):
    w.data = torch.cat([x, x * 2])
    return x.sum()


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_tensor_given_a_new_size_through_data_matches_eager(backend):
    compiled = compiler.compile(_regrow, backend=backend, fullgraph=True)
    for n in (3, 5):
        results = []
        for f in (_regrow, compiled):
            w, x = torch.zeros(2, requires_grad=True), torch.arange(float(n))
            out = f(w, x)
            results.append((out, w.detach().clone(), w.requires_grad, w.is_leaf))
        torch.testing.assert_close(results[1], results[0])


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 0.5))

    def forward(self, x):
        return self.lin(x) * self.scale


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_a_parameter_changed_in_place_between_calls_is_read_as_it_is_now(backend):
    # Each tensor keeps its identity while its strides, dtype or requires_grad change; the input stays the same.
    # The default backend's kernels, compiled for the old layout, read the weight transposed and the float64 scale
    # as float32 (wrong numbers, no error) until these were guarded.
    torch.manual_seed(0)
    model = _Scaled()
    compiled = compiler.compile(model, backend=backend)
    x = torch.randn(2, 4)
    weight = model.lin.weight
    changes = [
        lambda: None,
        lambda: setattr(weight, "data", weight.data.t().contiguous().t()),  # the same values, strides swapped
        lambda: setattr(model.scale, "data", model.scale.data.double()),
        lambda: weight.requires_grad_(False),
        lambda: setattr(model.scale, "data", model.scale.data[None].expand(3, 4)[1]),  # a view, stride 1 kept
    ]
    for change in changes:
        change()
        expected, actual = model(x), compiled(x)
        assert actual.dtype == expected.dtype and actual.requires_grad == expected.requires_grad
        torch.testing.assert_close(actual, expected)
