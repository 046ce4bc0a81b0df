"""The runtime with the real converter and real guards: graphs, recompiles, limits, backends, export, logs."""

from __future__ import annotations

import logging
import warnings

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


@pytest.fixture(autouse=True)
def fresh_runtime():
    capture.reset()
    yield
    capture.reset()


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def scale_by(x, n):
    return x * n


def test_toy_example_gives_three_graphs_over_many_calls_all_equal_to_eager() -> None:
    counter = CompileCounter()
    compiled = capture.optimize(counter)(toy_example)
    generator = torch.Generator().manual_seed(0)
    for _ in range(100):
        a, b = torch.randn(10, generator=generator), torch.randn(10, generator=generator)
        torch.testing.assert_close(compiled(a, b), toy_example(a, b))
    assert counter.frame_count == 3


def test_recompile_on_dtype_change_is_logged_with_the_failed_guard(caplog: pytest.LogCaptureFixture) -> None:
    counter = CompileCounter()
    compiled = capture.optimize(counter)(scale_by)
    compiled(torch.ones(3), 2)
    with caplog.at_level(logging.INFO, logger="dynajit.recompiles"):
        result = compiled(torch.ones(3, dtype=torch.float64), 2)
    torch.testing.assert_close(result, torch.full((3,), 2.0, dtype=torch.float64))
    assert counter.frame_count == 2
    (record,) = [r for r in caplog.records if r.name == "dynajit.recompiles"]
    message = record.getMessage()
    assert message.startswith(f"Recompiling function scale_by in {__file__}:")
    assert "dtype: expected float32, got float64" in message


def test_guards_log_lists_one_guard_per_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="dynajit.guards"):
        capture.optimize(CompileCounter())(scale_by)(torch.ones(2), 3)
    (record,) = [r for r in caplog.records if r.name == "dynajit.guards"]
    lines = record.getMessage().splitlines()
    assert lines[0] == "GUARDS:" and "- local 'x' TENSOR_MATCH" in lines and "- global '' BACKEND_MATCH" in lines


def test_each_backend_compiles_once_and_reuses_its_entry() -> None:
    first, second = CompileCounter(), CompileCounter()
    x = torch.ones(4)
    for backend in (first, second, first):
        torch.testing.assert_close(capture.optimize(backend)(scale_by)(x, 5), x * 5)
    assert (first.frame_count, second.frame_count) == (1, 1)


def test_cache_size_limit_falls_back_to_eager_with_one_warning() -> None:
    counter = CompileCounter()
    compiled = capture.optimize(counter)(scale_by)
    x = torch.ones(2)
    # strict=False: this test checks the non-strict fallback itself (test_rt_strict covers strict mode)
    with capture.config.patch(cache_size_limit=2, strict=False), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(5):
            torch.testing.assert_close(compiled(x, n), x * n)
    assert counter.frame_count == 2
    assert len([w for w in caught if issubclass(w.category, capture.RecompileLimitWarning)]) == 1


class BlockWithBreak(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.lin(x).relu()
        print(end="")  # a graph break: each layer's forward is a frame of its own
        return x * 2


def test_the_cache_size_limit_counts_entries_per_module_instance() -> None:
    """Twelve equal layers with a break inside forward: each compiles its own entry, none runs eagerly."""
    layers = torch.nn.Sequential(*(BlockWithBreak() for _ in range(12)))
    counter = CompileCounter()
    compiled = capture.optimize(counter)(layers)
    x = torch.randn(2, 4)
    with capture.config.patch(strict=True), capture.observe() as seen:
        for _ in range(2):
            torch.testing.assert_close(compiled(x), layers(x))
    assert {frame.kind for frame in seen.frames} <= {"compiled", "skip"}  # no fallback
    assert counter.frame_count == 12 + 1  # each layer's forward, and the resume function they share


def test_the_cache_size_limit_still_bounds_one_module_instance_and_all_in_all() -> None:
    layer, other = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)
    compiled, compiled_other = capture.optimize(CompileCounter())(layer), capture.optimize(CompileCounter())(other)
    dtypes = (torch.float32, torch.float64, torch.bfloat16)
    with capture.config.patch(cache_size_limit=2, strict=True):
        for dtype in dtypes[:2]:
            layer.to(dtype), other.to(dtype)
            compiled(torch.randn(2, 4, dtype=dtype))
            compiled_other(torch.randn(2, 4, dtype=dtype))  # another instance: its own two
        with pytest.raises(capture.StrictModeError, match=r"config.cache_size_limit \(2\)"):
            layer.to(dtypes[2])
            compiled(torch.randn(2, 4, dtype=dtypes[2]))
    with capture.config.patch(accumulated_cache_size_limit=4, strict=True):
        third = torch.nn.Linear(4, 4).to(dtypes[1])
        with pytest.raises(capture.StrictModeError, match=r"config.accumulated_cache_size_limit \(4\)"):
            capture.optimize(CompileCounter())(third)(torch.randn(2, 4, dtype=dtypes[1]))


def test_fullgraph_graph_break_names_reason_and_line() -> None:
    from dynajit.capture._frame import Unsupported

    with pytest.raises(Unsupported) as info:
        capture.optimize(CompileCounter(), fullgraph=True)(toy_example)(torch.ones(2), torch.ones(2))
    assert "tensor's value" in str(info.value) and f"{__file__}:" in str(info.value)


def _raising_step_then_a_live_closure(x):
    # torch.func.grad's switch of saved-tensor hooks raised on fake tensors, seeing tracing's own hook: a step
    # left to Python as one raising eager's error, even under fullgraph, where it does not raise. The frame ran
    # in Python with the break, under fullgraph, where a break is an error.
    return torch.func.grad(lambda r: r.sin().sum())(x)


def test_fullgraph_never_runs_a_frame_with_a_graph_break() -> None:
    from dynajit.capture._frame import Unsupported

    x = torch.randn(3)
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(_raising_step_then_a_live_closure)
    try:
        with capture.observe() as seen:
            actual = compiled(x)
    except Unsupported:
        return
    assert [b for frame in seen.frames for b in frame.graph_breaks] == []
    torch.testing.assert_close(actual, _raising_step_then_a_live_closure(x))


def test_stance_fail_on_recompile_with_real_guards() -> None:
    compiled = capture.optimize(CompileCounter())(scale_by)
    compiled(torch.ones(2), 2)
    with capture.set_stance("fail_on_recompile"), pytest.raises(capture.RecompileError, match="'n'"):
        compiled(torch.ones(2), 3)


def test_export_returns_a_graph_callable_with_the_same_inputs_and_its_guards() -> None:
    def f(x, y, scale):
        return torch.sin(x) * scale + y

    x, y = torch.randn(3), torch.randn(3)
    result = capture.export(f)(x, y, 2.0)
    torch.testing.assert_close(result.graph_module(x, y, 2.0), f(x, y, 2.0))
    assert "TENSOR_MATCH" in str(result.guards)


def test_export_graph_break_raises_with_reason_and_line() -> None:
    with pytest.raises(capture.ExportError, match="tensor's value") as info:
        capture.export(toy_example)(torch.ones(2), torch.ones(2))
    assert f"{__file__}:" in str(info.value)


def noisy(x):
    y = torch.cos(x)
    print("", end="")  # a graph break inside the callee
    return y * 2


def calls_noisy(x):
    a = torch.sin(x)
    b = noisy(a)
    return b + 1


@capture.disable
def eager_only(x):
    return torch.tan(x)


def calls_eager_only(x):
    return eager_only(torch.sin(x)) + 1


def graph_targets(counter: CompileCounter) -> list[list[str]]:
    return [[str(node.target) for node in gm.graph.nodes if node.op == "call_function"] for gm in counter.graphs]


def test_a_callee_that_breaks_is_intercepted_and_captured_in_its_own_graphs() -> None:
    counter = CompileCounter()
    compiled = capture.optimize(counter)(calls_noisy)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), calls_noisy(x))
    names = graph_targets(counter)
    assert len(names) == 4, names
    assert "cos" in " ".join(names[1]) and "mul" in " ".join(names[2]), names


def test_a_disabled_callee_runs_eagerly_outside_every_graph() -> None:
    counter = CompileCounter()
    x = torch.randn(3)
    torch.testing.assert_close(capture.optimize(counter)(calls_eager_only)(x), calls_eager_only(x))
    assert counter.frame_count == 2
    assert not any("tan" in target for targets in graph_targets(counter) for target in targets)


def test_fullgraph_wrapper_does_not_reuse_an_entry_with_graph_breaks() -> None:
    from dynajit.capture._frame import Unsupported

    counter = CompileCounter()
    a, b = torch.ones(2), torch.ones(2)
    torch.testing.assert_close(capture.optimize(counter)(toy_example)(a, b), toy_example(a, b))
    with pytest.raises(Unsupported, match="tensor's value"):
        capture.optimize(counter, fullgraph=True)(toy_example)(a, b)


def test_throwaway_backends_do_not_exhaust_the_cache_even_with_resume_functions() -> None:
    a, b = torch.ones(2), -torch.ones(2)
    with capture.config.patch(cache_size_limit=4), warnings.catch_warnings():
        warnings.simplefilter("error")  # a limit warning would fail the test
        for _ in range(6):  # a fresh backend per call, as explain does
            counter = CompileCounter()
            torch.testing.assert_close(capture.optimize(counter)(toy_example)(a, b), toy_example(a, b))
            assert counter.frame_count == 2
