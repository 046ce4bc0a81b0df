"""Constructs real models use that used to break the graph, now traced with their facts guarded:
``os.environ`` reads, ``torch.finfo``/``torch.iinfo``, and stateless torch.nn modules made inside forward."""

from __future__ import annotations

import os

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _compile(fn):
    capture.reset()
    counter = CompileCounter()
    return capture.optimize(counter)(fn), counter


def _no_breaks(fn, *args):
    with capture.observe() as seen:
        result = fn(*args)
    assert [b.reason for frame in seen.frames for b in frame.graph_breaks] == []
    return result


@pytest.fixture
def env_flag(monkeypatch):
    monkeypatch.delenv("DYNAJIT_TEST_FLAG", raising=False)
    return monkeypatch


def test_environ_get_is_read_and_guarded(env_flag):
    def f(x):
        if os.environ.get("DYNAJIT_TEST_FLAG", "0") == "1":
            return x + 1
        return x - 1

    g, counter = _compile(f)
    x = torch.ones(2)
    assert torch.equal(_no_breaks(g, x), f(x))
    env_flag.setenv("DYNAJIT_TEST_FLAG", "1")
    assert torch.equal(g(x), f(x))
    env_flag.setenv("DYNAJIT_TEST_FLAG", "2")
    assert torch.equal(g(x), f(x))
    assert counter.frame_count == 3


def test_environ_subscript_and_membership(env_flag):
    env_flag.setenv("DYNAJIT_TEST_FLAG", "3")

    def f(x):
        scale = int(os.environ["DYNAJIT_TEST_FLAG"]) if "DYNAJIT_TEST_FLAG" in os.environ else 1
        return x * scale

    g, _ = _compile(f)
    x = torch.ones(2)
    assert torch.equal(_no_breaks(g, x), f(x))
    env_flag.delenv("DYNAJIT_TEST_FLAG")
    assert torch.equal(g(x), f(x))


def test_finfo_and_iinfo_in_masked_fill(check, t):
    def f(x):
        mask = x > 0
        return (
            x.masked_fill(mask, torch.finfo(x.dtype).min),
            x + torch.iinfo(torch.int32).max,
            x * torch.finfo(torch.float16).eps,
        )

    check(f, t(3, 4), graphs=1)
    check(f, t(3, 4, dtype=torch.float64), graphs=1)


def test_stateless_modules_made_inside_forward(check, t):
    def f(x, y):
        h = torch.nn.ReLU()(x) + torch.nn.GELU(approximate="tanh")(x)
        return torch.nn.Softmax(dim=-1)(h), torch.nn.CrossEntropyLoss(reduction="sum")(x, y)

    check(f, t(3, 4), torch.tensor([0, 1, 2]), graphs=1)


def test_module_made_inside_forward_escapes():
    def f(x):
        act = torch.nn.LeakyReLU(0.2)
        return act(x), act

    g, _ = _compile(f)
    x = torch.randn(4)
    out, act = _no_breaks(g, x)
    assert type(act) is torch.nn.LeakyReLU and act.negative_slope == 0.2
    torch.testing.assert_close(out, f(x)[0])


def test_module_with_parameters_made_inside_forward_runs_in_python(check, t):
    torch.manual_seed(0)

    def f(x):
        torch.manual_seed(1)
        return torch.nn.Linear(4, 2)(x)

    check(f, t(3, 4))
