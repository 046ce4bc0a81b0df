"""The failure classes the real-model suite finds, each reduced to a few lines of plain PyTorch.

Every case runs eagerly and under ``dynajit.compiler.compile`` on the same
inputs and must give the same result in one graph, with no graph break and no
fallback to eager. Each case names the models it stands for, so a regression
shows here first, in seconds, before the model entries it breaks.
"""

from __future__ import annotations

import collections.abc
import contextvars
import copy
import os
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

pytestmark = pytest.mark.slow


def _compiled_run(fn: Callable[..., Any], *args: Any, backend: str = "eager") -> tuple[Any, list[str]]:
    """Run ``fn`` compiled; return its result and every problem seen (breaks, fallbacks, graph count)."""
    import dynajit.capture as capture
    import dynajit.compiler

    dynajit.compiler.reset()
    with capture.observe() as seen, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = dynajit.compiler.compile(fn, backend=backend)(*args)
    problems = [f"break: {brk.reason}" for brk in seen.graph_breaks]
    problems += [f"{frame.kind}: {frame.reason}" for frame in seen.frames if frame.kind in ("eager", "error")]
    problems += [f"warning: {w.message}" for w in caught if issubclass(w.category, RuntimeWarning)]
    if len(seen.graphs) != 1:
        problems.append(f"{len(seen.graphs)} graphs")
    dynajit.compiler.reset()
    return result, problems


def _check(fn: Callable[..., Any], *args: Any, backend: str = "eager") -> None:
    expected = fn(*copy.deepcopy(args))
    actual, problems = _compiled_run(fn, *copy.deepcopy(args), backend=backend)
    torch.testing.assert_close(actual, expected)
    assert not problems, problems


# --- silent wrong results ------------------------------------------------------------------------------------------


def _leaf(x: torch.Tensor) -> torch.Tensor:
    import dynajit.capture

    dynajit.capture.graph_break()
    return x * 2


def _middle(hs: torch.Tensor) -> torch.Tensor:
    return _leaf(hs + 1)


def _rebound_parameter(hs: torch.Tensor) -> torch.Tensor:
    residual = hs
    hs = hs.sin()
    hs = _middle(hs)
    return residual + hs


def test_resume_after_nested_break_keeps_aliased_local() -> None:
    x = torch.randn(4)
    expected = _rebound_parameter(x)
    actual, _ = _compiled_run(_rebound_parameter, x)  # the break itself is expected here
    torch.testing.assert_close(actual, expected)


# --- whole frames falling back to eager ----------------------------------------------------------------------------


def test_batchnorm_eval_under_no_grad() -> None:
    bn = torch.nn.BatchNorm2d(4).eval()
    with torch.no_grad():
        _check(bn, torch.randn(2, 4, 3, 3), backend="inductor")  # capture alone (backend "eager") is right


def _int_iadd(t: torch.Tensor) -> torch.Tensor:
    acc = 0
    acc += (t > 0).long() * 4  # T5's relative position buckets start from an int
    return acc + t


def test_int_augmented_add_of_tensor() -> None:
    _check(_int_iadd, torch.randn(4))


def test_submodule_name_with_dash() -> None:
    model = torch.nn.Sequential()
    model.add_module("block1-0", torch.nn.Linear(4, 4))
    _check(model, torch.randn(2, 4))


# --- graph breaks --------------------------------------------------------------------------------------------------


def _finfo_min(t: torch.Tensor) -> torch.Tensor:
    return t.clamp_min(torch.finfo(t.dtype).min)


def test_finfo_min() -> None:
    _check(_finfo_min, torch.randn(4))


def _environ_flag(t: torch.Tensor) -> torch.Tensor:
    return t * 2 if os.environ.get("DYNAJIT_TEST_UNSET_FLAG", "0") == "1" else t + 1


def test_os_environ_get() -> None:
    _check(_environ_flag, torch.randn(4))


class _Registry(collections.abc.MutableMapping):
    def __init__(self) -> None:
        self._items: dict[str, Callable[..., Any]] = {"sdpa": torch.sin}

    def __getitem__(self, key: str) -> Callable[..., Any]:
        return self._items[key]

    def __setitem__(self, key: str, value: Callable[..., Any]) -> None:
        self._items[key] = value

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def __iter__(self) -> Any:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


_REGISTRY = _Registry()


def test_mapping_get_default() -> None:
    _check(lambda t: _REGISTRY.get("eager", torch.cos)(t), torch.randn(4))


_VAR: contextvars.ContextVar[int | None] = contextvars.ContextVar("var", default=None)


def _context_var(t: torch.Tensor) -> torch.Tensor:
    token = _VAR.set(1)
    y = t + 1
    _VAR.reset(token)
    return y


def test_context_var_set_reset() -> None:
    _check(_context_var, torch.randn(4))


def _stochastic_depth(t: torch.Tensor) -> torch.Tensor:
    return t


def test_function_class_attribute() -> None:
    _check(lambda t: t * 2 if _stochastic_depth.__class__.__name__ == "function" else t, torch.randn(4))


def test_multihead_attention_eval_no_grad() -> None:
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    with torch.no_grad():
        _check(lambda t: mha(t, t, t, need_weights=False)[0], torch.randn(2, 3, 8))


def test_module_constructed_in_forward() -> None:
    _check(lambda t: torch.nn.CrossEntropyLoss()(t.view(1, 4), torch.tensor([1])), torch.randn(4))


def test_getattr_default_on_none() -> None:
    _check(lambda t: t + 1 if getattr(None, "is_compileable", False) else t * 2, torch.randn(4))


class _SlidingCache:
    """Like transformers' DynamicCache: a property the masking code probes with hasattr(), Python __iter__/__len__."""

    def __init__(self, t: torch.Tensor) -> None:
        self.layers = [t, t + 1]

    @property
    def is_sliding(self) -> list[bool]:
        return [False for _ in self.layers]

    def __len__(self) -> int:
        return len(self.layers)

    def __iter__(self) -> Any:
        for layer in self.layers:  # noqa: UP028  (a plain generator: `yield from` is another failure class)
            yield layer


def _mask_and_cache(t: torch.Tensor) -> torch.Tensor:
    cache = _SlidingCache(t)
    if hasattr(cache, "is_sliding") and True in cache.is_sliding:  # mistral's masking_utils
        t = t * 3
    if cache:  # whisper's attention: the truth value from __len__
        for layer in cache:  # t5 / bart: iterating the cache
            t = t + layer
    return t


def test_hasattr_property_and_cache_protocols() -> None:
    _check(_mask_and_cache, torch.randn(4))


class _Output(collections.OrderedDict):
    def to_tuple(self) -> tuple[Any, ...]:
        return tuple(self[k] for k in self.keys())


def test_dict_subclass_keys_of_an_output_from_the_frame() -> None:
    _check(lambda t, out: t * out.to_tuple()[0], torch.randn(4), _Output(a=torch.randn(4)))


# --- recompiles ----------------------------------------------------------------------------------------------------


class _Cache:
    def __init__(self) -> None:
        self.keys = torch.zeros(1, 0, 4)

    def update(self, k: torch.Tensor) -> torch.Tensor:
        self.keys = torch.cat([self.keys, k], dim=1)
        return self.keys


def _decode_step(x: torch.Tensor, cache: _Cache) -> torch.Tensor:
    return (cache.update(x) * x).sum(1)


def test_growing_attribute_tensor_compiles_at_most_three_times() -> None:
    """A cache growing from 0 tokens compiles for 0, for 1 (sizes 0 and 1 are specialised, as in torch.compile,
    which also compiles 3 frames here) and once for every longer length."""
    import dynajit.capture as capture
    import dynajit.compiler

    dynajit.compiler.reset()
    cache, eager_cache = _Cache(), _Cache()
    step = dynajit.compiler.compile(_decode_step)
    with capture.observe() as seen:
        for _ in range(10):
            x = torch.randn(1, 1, 4)
            torch.testing.assert_close(step(x, cache), _decode_step(x, eager_cache))
    dynajit.compiler.reset()
    assert len(seen.frames) <= 3, [frame.recompile_reasons for frame in seen.frames]
