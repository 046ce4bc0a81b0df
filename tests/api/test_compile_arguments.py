"""``compile``'s argument checks: they fail at the ``compile`` call, with messages naming the fix."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from dynajit import _dynamo, compiler
from dynajit.compiler import _registry
from dynajit.compiler._compile import backend_catalog, resolve_backend


def tunable_backend(gm, example_inputs, *, mode=None, options=None):
    return gm.forward


tunable_backend.list_mode_options = lambda: {"default": {}, "fast": {"unroll": True}}
tunable_backend.list_options = lambda: ["unroll", "unroll_limit", "vectorize"]


def plain_backend(gm, example_inputs):
    return gm.forward


def fn(x):
    return x + 1


@pytest.fixture(autouse=True)
def backends(clean_registry):
    _dynamo.register_backend(tunable_backend, "tunable")
    _dynamo.register_backend(plain_backend, "plain")


def test_unknown_backend_lists_the_backends():
    with pytest.raises(_registry.BackendNotFound) as info:
        compiler.compile(fn, backend="tunabel")
    message = str(info.value)
    assert "unknown backend 'tunabel'" in message and "Did you mean 'tunable'" in message
    for name in ("eager", "inductor", "plain", "tunable"):
        assert name in message


def test_unknown_backend_fails_at_the_decorator_line():
    with pytest.raises(_registry.BackendNotFound):
        compiler.compile(backend="no_such_backend")


def test_unknown_mode_lists_the_modes():
    with pytest.raises(
        ValueError, match=r"unknown mode 'fastest' for backend 'tunable'; available modes: 'default', 'fast'"
    ):
        compiler.compile(fn, backend="tunable", mode="fastest")


def test_unknown_option_names_close_matches():
    with pytest.raises(ValueError, match=r"unknown option 'unrol' for backend 'tunable'\. Did you mean 'unroll'"):
        compiler.compile(fn, backend="tunable", options={"unrol": True})


def test_mode_or_options_for_a_backend_without_them_is_an_error():
    with pytest.raises(TypeError, match="backend 'plain' does not take mode= or options="):
        compiler.compile(fn, backend="plain", mode="default")


def test_options_must_be_a_mapping():
    with pytest.raises(TypeError, match="options must be a dict"):
        compiler.compile(fn, backend="tunable", options=["unroll"])


def test_bound_backend_receives_mode_and_options_and_is_reused():
    bound = resolve_backend("tunable", "fast", {"unroll": False})
    assert bound.keywords == {"mode": "fast", "options": {"unroll": False}}
    assert resolve_backend("tunable", "fast", {"unroll": False}) is bound
    assert resolve_backend("tunable") is tunable_backend


def test_a_package_can_describe_its_backend_modes(monkeypatch):
    package = types.ModuleType("fake_backend_pkg")
    package.list_mode_options = lambda: {"default": {}, "turbo": {}}
    package.list_options = lambda: ["threads"]
    inner = types.ModuleType("fake_backend_pkg._impl")
    monkeypatch.setitem(sys.modules, "fake_backend_pkg", package)
    monkeypatch.setitem(sys.modules, "fake_backend_pkg._impl", inner)

    def packaged(gm, example_inputs, *, mode=None, options=None):
        return gm.forward

    packaged.__module__ = "fake_backend_pkg._impl"
    assert backend_catalog(packaged) == (["default", "turbo"], ["threads"])
    with pytest.raises(ValueError, match="available modes: 'default', 'turbo'"):
        resolve_backend(packaged, mode="warp")
    assert backend_catalog(plain_backend) is None


def test_disable_returns_the_model_unchanged_without_resolving_anything():
    module = torch.nn.Linear(2, 2)
    assert compiler.compile(fn, disable=True) is fn
    assert compiler.compile(module, backend="no_such_backend", disable=True) is module
    assert compiler.compile(disable=True)(fn) is fn


def test_dynamic_must_be_a_bool_or_none():
    with pytest.raises(TypeError, match="dynamic must be None, True or False"):
        compiler.compile(fn, backend="plain", dynamic="yes")


def test_unhashable_option_values_still_bind():
    bound = resolve_backend("tunable", None, {"unroll": [1, 2]})
    assert bound.keywords == {"mode": None, "options": {"unroll": [1, 2]}}
