"""Process state around and inside functions compiled with the default backend: torch modes, state writes.

A torch dispatch mode sees every aten op eager runs, and a compiled graph's kernels run none: under one (the
caller's, a fake-tensor mode) the function runs as it is, whether or not it was compiled before. So it does under
a torch function mode other than a default device, which would see compiling's own torch calls and the compiled
graph's, not the function's; a default device (``with torch.device(...)``) does not stop compiling. A write of
torch's process state inside a function (``torch.set_num_threads``) is made by Python on every call, as in
eager, not once while tracing. Each case compares values, dtypes and the state left behind with eager's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import dynajit.capture
import dynajit.compiler


@pytest.fixture(autouse=True)
def _restored(process_state: Any) -> Iterator[None]:
    dynajit.compiler.reset()
    yield
    dynajit.compiler.reset()


# name: the write the function makes
WRITES: dict[str, Callable[[], Any]] = {
    "thread count": lambda: torch.set_num_threads(1),
    "anomaly mode": lambda: torch.set_anomaly_enabled(True),
    "warn always": lambda: torch.set_warn_always(True),
    "matmul precision": lambda: torch.set_float32_matmul_precision("high"),
    "deterministic algorithms": lambda: torch.use_deterministic_algorithms(True),
    "default dtype": lambda: torch.set_default_dtype(torch.float64),
    "flush denormal": lambda: torch.set_flush_denormal(False),
}


@pytest.mark.parametrize("name", WRITES)
def test_a_state_write_happens_on_every_call_as_in_eager(name: str, process_state: Any) -> None:
    write = WRITES[name]

    def fn(x):
        write()
        return x * 2, torch.ones(2)

    compiled = dynajit.compiler.compile(fn)
    before = process_state.read()
    for _ in range(2):
        expected = fn(torch.ones(3))
        after_eager = process_state.read()
        process_state.restore(before)
        actual = compiled(torch.ones(3))
        assert process_state.read() == after_eager
        process_state.restore(before)
        for a, e in zip(actual, expected, strict=True):
            assert a.dtype == e.dtype
            torch.testing.assert_close(a, e)


class _AddsToProducts(TorchDispatchMode):
    """A mode that changes what ``mul`` returns: code run under it is seen to have run under it."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out + 100 if func is torch.ops.aten.mul.Tensor else out


def _scaled(x):
    return (x * 2).relu() + 1


@pytest.mark.parametrize("first_call_under_mode", [False, True])
def test_under_a_dispatch_mode_the_function_runs_as_it_is(first_call_under_mode: bool) -> None:
    compiled = dynajit.compiler.compile(_scaled)
    x = torch.randn(8)
    calls = [True, False, True] if first_call_under_mode else [False, True, False]
    for under_mode in calls:
        if under_mode:
            with _AddsToProducts():
                expected = _scaled(x)
            with _AddsToProducts():
                actual = compiled(x)
        else:
            expected, actual = _scaled(x), compiled(x)
        torch.testing.assert_close(actual, expected)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # (a compile that fails warns and runs eagerly from then on)
def test_under_a_fake_tensor_mode_the_function_runs_on_fake_tensors() -> None:
    compiled = dynajit.compiler.compile(_scaled)
    compiled(torch.randn(8))  # compiled for real tensors first
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.randn(8))
        out = compiled(fake)
    assert type(out).__name__ == "FakeTensor" and out.shape == (8,)


class _Counting(TorchFunctionMode):
    """A mode counting the torch calls made under it (an op counter or logger, as users write them)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _scaled_inside_a_mode(x, mode):
    with mode:
        y = x * 3 + 1
    return y.relu()


def test_a_torch_function_mode_sees_the_calls_eager_makes() -> None:
    compiled = dynajit.compiler.compile(_scaled)
    x = torch.randn(8)
    for _ in range(2):  # (the first call under the mode, then one after an entry exists)
        eager_mode, compiled_mode = _Counting(), _Counting()
        with eager_mode:
            expected = _scaled(x)
        with compiled_mode:
            actual = compiled(x)
        torch.testing.assert_close(actual, expected)
        assert compiled_mode.calls == eager_mode.calls
        torch.testing.assert_close(compiled(x), _scaled(x))  # (and compiled outside it)


def test_a_torch_function_mode_entered_inside_sees_the_calls_eager_makes() -> None:
    compiled = dynajit.compiler.compile(_scaled_inside_a_mode)
    x = torch.randn(8)
    for _ in range(2):
        eager_mode, compiled_mode = _Counting(), _Counting()
        torch.testing.assert_close(compiled(x, compiled_mode), _scaled_inside_a_mode(x, eager_mode))
        assert compiled_mode.calls == eager_mode.calls


def test_under_a_default_device_functions_still_compile() -> None:
    compiled, x = dynajit.compiler.compile(_scaled), torch.randn(8)
    with dynajit.capture.observe() as seen, torch.device("cpu"):
        torch.testing.assert_close(compiled(x), _scaled(x))
    assert [frame.kind for frame in seen.frames] == ["compiled"]
