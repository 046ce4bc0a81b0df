"""Random numbers against eager: same seed, same numbers, the same state after the call, on every backend.

Compiled code draws from torch's global generator as eager does (each call new numbers, the generator advanced
exactly as far), and reads Python's and NumPy's generators at every call rather than once at tracing. Saving and
restoring the global state inside the function (``torch.get_rng_state``/``set_rng_state``) is a graph break: a
backend traces the graph once, so the saved state was the trace's and the restore never reached the draws after it.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from dynajit import compiler

pytestmark = pytest.mark.usefixtures("fresh_compiler")

F = torch.nn.functional

_DRAWS = {
    "rand_like": lambda x: torch.rand_like(x) + x,
    "dropout": lambda x: F.dropout(x, 0.5, training=True),
    "bernoulli": lambda x: torch.bernoulli(torch.full_like(x, 0.5)),
    "normal_": lambda x: x.clone().normal_(),
    "multinomial": lambda x: torch.multinomial(x.abs() + 0.1, 2).float(),
    "python_random": lambda x: x * (2 if random.random() < 0.5 else 3),
    "numpy_random": lambda x: x * float(np.random.rand()),
    "state_restored": lambda x: _drawn_twice(x),
    "generator_state_restored": lambda x: _drawn_twice_from(x, _GENERATOR),
}
_GENERATOR = torch.Generator()


def _drawn_twice(x):
    state = torch.get_rng_state()
    first = torch.rand(x.shape)
    torch.set_rng_state(state)
    return x + first - torch.rand(x.shape)  # x exactly


def _drawn_twice_from(x, generator):
    state = generator.get_state()
    first = torch.rand(x.shape, generator=generator)
    generator.set_state(state)
    return x + first - torch.rand(x.shape, generator=generator)


def _calls(fn):
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    _GENERATOR.manual_seed(0)
    x = torch.linspace(-1, 1, 32).view(4, 8)
    results = [fn(x) for _ in range(4)]
    return results, torch.rand(3), random.random(), float(np.random.rand())


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
@pytest.mark.parametrize("name", list(_DRAWS))
def test_random_draws_and_state_after_the_call_are_eagers(backend, name):
    fn = _DRAWS[name]
    expected = _calls(fn)
    actual = _calls(compiler.compile(fn, backend=backend))
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
