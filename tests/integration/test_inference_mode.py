"""Frames run under ``torch.inference_mode``: compiled, they give eager's values and eager's tensors.

Eager makes new tensors in inference mode inference tensors, and a view of a normal tensor that requires grad a
normal view that still requires it. A graph traced there is reused only there (GLOBAL_STATE reads the mode:
``torch.is_inference_mode_enabled()`` and ``is_inference()`` were answered for it), and backends compile it as
under ``no_grad`` (AOT autograd traced under inference mode returned such views not requiring grad). Each case
runs eagerly and compiled on the same inputs, sizes that go dynamic included, and compares values and each
output's ``requires_grad``, ``is_inference()`` and whether it is a view.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch

from dynajit import compiler

BACKENDS = ["inductor", "aot_eager", "eager"]
SIZES = [(0, 0), (2, 1), (3, 1), (1, 3)]  # 0 and 1 are static, then the first dim goes dynamic


def view_in_an_inference_block(x):
    # (the block is a graph break: the view is made in a resume function entered under inference mode)
    with torch.inference_mode():
        v = x.squeeze()
    return v


def view_then_clone_in_an_inference_block(x):
    with torch.inference_mode():
        v = x.squeeze()
    return v.clone()


def break_inside_an_inference_block(x):
    with torch.inference_mode():
        print(end="")
        v = x.squeeze()
        w = x * 2
    return v, w


def view_of_a_transposed_input(x):
    return x.mT.squeeze()


def _kind(t: Any) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    return (t.requires_grad, t.is_inference(), t._is_view(), t.dtype, tuple(t.shape))


def _outputs(result: Any) -> list[Any]:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _compare(expected: Any, actual: Any) -> None:
    expected, actual = _outputs(expected), _outputs(actual)
    assert [_kind(t) for t in actual] == [_kind(t) for t in expected]
    torch.testing.assert_close([t.detach() for t in actual], [t.detach() for t in expected])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "fn", [view_in_an_inference_block, view_then_clone_in_an_inference_block, break_inside_an_inference_block]
)
def test_views_made_in_an_inference_block_keep_eagers_autograd_state(fn, backend):
    compiler.reset()
    compiled = compiler.compile(fn, backend=backend)
    for call, size in enumerate(SIZES):
        leaf = torch.randn(size, generator=torch.Generator().manual_seed(call)).requires_grad_()
        x = leaf.clone()
        _compare(fn(x), compiled(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_frame_entered_under_inference_mode_returns_eagers_tensors(backend):
    compiler.reset()
    compiled = compiler.compile(view_of_a_transposed_input, backend=backend)
    for call, size in enumerate(SIZES):
        x = torch.randn(size, generator=torch.Generator().manual_seed(call)).requires_grad_().clone()
        with torch.inference_mode():
            _compare(view_of_a_transposed_input(x), compiled(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_model_under_inference_mode_with_inference_inputs_that_go_dynamic(backend):
    # The inputs are inference tensors (made in the mode) and written in place: allowed under inference mode.
    compiler.reset()
    linear = torch.nn.Linear(3, 4)

    def forward(x, buffer):
        buffer.add_(1)
        return torch.relu(linear(x)) + buffer.sum(), linear.weight.t()

    compiled = compiler.compile(forward, backend=backend)
    for rows in (2, 3, 5):
        with torch.inference_mode():
            x = torch.randn(rows, 3)
            expected_buffer, actual_buffer = torch.zeros(rows, 1), torch.zeros(rows, 1)
            expected, actual = forward(x, expected_buffer), compiled(x, actual_buffer)
        _compare(expected, actual)
        torch.testing.assert_close(actual_buffer, expected_buffer)


def reads_the_mode(x):
    if torch.is_inference_mode_enabled():
        return x + 1
    return x - 1


def reads_inference_of_an_intermediate(x):
    y = x * 2
    if y.is_inference():
        return y + 1
    return y - 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [reads_the_mode, reads_inference_of_an_intermediate])
def test_a_graph_traced_under_inference_mode_is_not_reused_under_no_grad(fn, backend):
    # Both read facts that differ between the two modes; without the guard the second call reused the first's
    # graph and answered for inference mode.
    compiler.reset()
    compiled = compiler.compile(fn, backend=backend)
    x = torch.ones(2)
    for mode in (torch.inference_mode, torch.no_grad, torch.inference_mode, contextlib.nullcontext):
        with mode():
            _compare(fn(x), compiled(x))


def adds_its_input_to_itself(x):
    x += x
    return None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [(0, 1), (2, 3)])
def test_a_write_under_inference_mode_into_a_view_that_requires_grad(size, backend):
    # Compiled as under no_grad, AOT autograd failed an internal assert on this write (the compile fell back).
    compiler.reset()
    compiled = compiler.compile(adds_its_input_to_itself, backend=backend)
    results = []
    for run in (adds_its_input_to_itself, compiled):
        x = torch.randn(size, generator=torch.Generator().manual_seed(0)).requires_grad_().clone().mT
        with torch.inference_mode():
            run(x)
        results.append((x.detach(), x.requires_grad, x._version))
    torch.testing.assert_close(results[1], results[0])


def records_under_enable_grad(x):
    with torch.enable_grad():  # under inference mode it records nothing
        y = torch.zeros_like(x).index_add(0, torch.zeros(x.shape[0], dtype=torch.long), x)
        z = x * 2
    return y + 1, z, torch.is_grad_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
def test_enable_grad_under_inference_mode_records_nothing(backend):
    # The graph kept the block's grad-mode change: compiled as under no_grad, AOT autograd then recorded the
    # ops and saved inference tensors for a backward, which autograd refused (a RuntimeError eager never raises).
    compiler.reset()
    compiled = compiler.compile(records_under_enable_grad, backend=backend)
    for rows in (2, 3, 4):
        x = torch.randn(rows, 3, generator=torch.Generator().manual_seed(rows)).requires_grad_().clone()
        with torch.inference_mode():
            expected, actual = records_under_enable_grad(x), compiled(x)
        assert expected[2] is actual[2] is False
        _compare(expected[:2], actual[:2])


def unsqueezes_its_input(x):
    x.unsqueeze_(0)
    return None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("leaf", [True, False], ids=["of_a_leaf", "of_an_activation"])
def test_a_layout_change_under_inference_mode_of_a_view_that_requires_grad(leaf, backend):
    # Compiled as under no_grad, AOT autograd failed an internal assert replaying the change (the compile fell back).
    compiler.reset()
    compiled = compiler.compile(unsqueezes_its_input, backend=backend)
    results = []
    for run in (unsqueezes_its_input, compiled):
        base = torch.randn(4, 1, 3, generator=torch.Generator().manual_seed(0)).requires_grad_()
        x = (base if leaf else base.clone())[::2]
        with torch.inference_mode():
            run(x)
        results.append((tuple(x.shape), x.stride(), x.requires_grad, x.detach()))
    assert results[1][:3] == results[0][:3]
    torch.testing.assert_close(results[1][3], results[0][3])


def squeezes_its_input_then_reads_it(x):
    x.squeeze_()
    if x.float().mean() < 0.5:
        return x * 2
    return x - 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_reading_a_view_after_its_layout_changed_under_inference_mode(mode, backend):
    # The trace read the changed view's history: a fake tensor's rebuild of it under inference mode failed an
    # internal assert, and the compile fell back. Eager reads that history afterwards, and a backward reaches it.
    compiler.reset()
    compiled = compiler.compile(squeezes_its_input_then_reads_it, backend=backend)
    for shape in ((2, 2), (2, 2), (1, 3), (3, 2)):  # a squeeze that keeps the shape, then ones that do not
        results = []
        for run in (squeezes_its_input_then_reads_it, compiled):
            base = torch.randn(shape, generator=torch.Generator().manual_seed(shape[1])).requires_grad_()
            x = base.clone().mT
            with mode():
                out = run(x)
            (x * torch.arange(x.numel()).view(x.shape)).sum().backward()
            results.append((tuple(x.shape), x.stride(), x.requires_grad, x.detach(), out, base.grad))
        assert results[1][:3] == results[0][:3]
        torch.testing.assert_close(results[1][3:], results[0][3:])
        assert _kind(results[1][4]) == _kind(results[0][4])


def flattens_then_transposes(x):
    v = x.flatten()
    v.t_()  # changes nothing of a vector, but eager marks the view: it was changed under inference_mode
    return v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [0, 3])
def test_a_layout_change_that_changes_nothing_under_inference_mode_marks_the_view_as_in_eager(size, backend):
    # (found by the fuzzer, --seed a114-1 --start 220) the trace dropped the no-op t_(), so the returned view
    # was unmarked, and using it where gradients are recorded worked where eager raises
    compiler.reset()
    compiled = compiler.compile(flattens_then_transposes, backend=backend)
    errors = []
    for run in (flattens_then_transposes, compiled):
        x = torch.randn(1, 1, size).requires_grad_().clone()
        with torch.inference_mode():
            out = run(x)
        try:
            out * 2
            errors.append(None)
        except RuntimeError as err:
            errors.append(str(err))
    assert errors[0] is not None
    assert errors[1] == errors[0]


def copies_a_view_into_itself(x):
    v = x.movedim(0, 0)
    v.copy_(v)
    return v


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_copy_into_itself_bumps_the_version_a_later_backward_checks(backend):
    # Eager's copy_ returns at once for a source that is its destination, after autograd bumped the version: the
    # view made in inference mode is then refused outside it. The graph recorded nothing for the copy (no raise).
    compiler.reset()
    compiled = compiler.compile(copies_a_view_into_itself, backend=backend)
    results = []
    for run in (copies_a_view_into_itself, compiled):
        x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0)).requires_grad_().clone()
        with torch.inference_mode():
            v = run(x)
        with pytest.raises(RuntimeError, match="A view was created in inference mode"):
            (v * 2).sum().backward()
        results.append((x._version, v._version, x.detach()))
    torch.testing.assert_close(results[1], results[0])


def writes_bits_of_a_tensor_made_in_an_inference_block(x):
    # (the block is a graph break: the write is traced in a resume function, where the tensor is an input)
    with torch.inference_mode():
        y = x * 3
    y.view(torch.int16).add_(1)
    return y + 1, y


def writes_bits_of_an_inference_input(x):
    x.view(torch.int16).add_(1)
    return x * 2


def writes_an_inference_input(x):
    x.add_(1)
    return x * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize(
    "fn",
    [writes_bits_of_a_tensor_made_in_an_inference_block, writes_bits_of_an_inference_input, writes_an_inference_input],
)
def test_a_write_outside_inference_mode_into_an_inference_tensor(fn, dtype, backend):
    # Eager refuses an in-place op on an inference tensor outside inference mode, but not through a dtype view,
    # which is a normal tensor. AOT autograd copied the new value into the inference input itself: a
    # RuntimeError eager never raises. Now the write is left to Python, which raises where eager does.
    compiler.reset()
    compiled = compiler.compile(fn, backend=backend)
    for call, size in enumerate(SIZES):
        results = []
        for run in (fn, compiled):
            with torch.inference_mode():
                x = torch.randn(size, generator=torch.Generator().manual_seed(call)).to(dtype)
            try:
                results.append((run(x), x))
            except RuntimeError as err:
                results.append((str(err), x))
        (expected, expected_input), (actual, actual_input) = results
        torch.testing.assert_close(actual_input, expected_input, equal_nan=True)
        if isinstance(expected, str) or isinstance(actual, str):
            assert actual == expected
            continue
        _compare(expected, actual)
