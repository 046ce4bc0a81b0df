"""The differential harness of the test_inductor_soundness_* suites: the default backend against eager.

``differential`` runs the same function eagerly and through ``dynajit.compiler.compile`` (backend ``inductor``) on
twins of the same inputs (same values, storage offset and strides) and compares values, dtypes, shapes,
strides, the inputs after the call and the exception raised; a frame that fell back to eager fails.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree
from twins import twin

import dynajit.capture as capture
from dynajit import compiler


def _call(fn: Callable[..., Any], args: list[Any]) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args), None
    except Exception as err:
        return None, err


def assert_same(expected: Any, actual: Any, strides: bool = True) -> None:
    """Values, dtypes, shapes, ``requires_grad`` and (where eager defines them) strides of two results match."""
    flat_e, spec_e = pytree.tree_flatten(expected)
    flat_a, spec_a = pytree.tree_flatten(actual)
    assert spec_e == spec_a
    for e, a in zip(flat_e, flat_a):
        if isinstance(e, torch.Tensor):
            assert isinstance(a, torch.Tensor)
            assert (a.shape, a.dtype, a.requires_grad) == (e.shape, e.dtype, e.requires_grad)
            if strides:
                # A size-1 dim's stride addresses nothing, and torch's own fake tensors (which give the
                # compiled graph its output layouts) and eager's TensorIterator pick them differently.
                kept = [d for d in range(e.dim()) if e.size(d) > 1]
                assert [a.stride(d) for d in kept] == [e.stride(d) for d in kept], (a.stride(), e.stride())
            torch.testing.assert_close(a, e, equal_nan=True, atol=1e-5, rtol=1e-5)
        else:
            assert a == e


def differential(
    fn: Callable[..., Any], *inputs: Any, compiled: Callable[..., Any] | None = None, strides: bool = True
) -> Any:
    """Run ``fn`` eagerly and compiled on twins of ``inputs``; compare results, inputs after, exceptions."""
    compiled = compiler.compile(fn) if compiled is None else compiled
    eager_args = [twin(x) for x in inputs]
    compiled_args = [twin(x) for x in inputs]
    expected, eager_err = _call(fn, eager_args)
    with capture.observe() as seen, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual, compiled_err = _call(compiled, compiled_args)
    assert [f.kind for f in seen.frames if f.kind in ("eager", "error")] == []
    assert not [w for w in caught if "eager" in str(w.message)], [str(w.message) for w in caught]
    if eager_err is not None or compiled_err is not None:
        assert type(compiled_err) is type(eager_err), (compiled_err, eager_err)
        assert str(compiled_err) == str(eager_err)
        return compiled
    assert_same(expected, actual, strides)
    for e, a in zip(eager_args, compiled_args):  # mutated inputs
        assert_same(e, a, strides)
    return compiled
