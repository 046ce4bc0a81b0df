"""In-place metadata ops on the frame's tensors (``x.t_()``, ``x.unsqueeze_(0)``, ...) against eager.

A backend reads a graph's placeholders as the inputs it is called with: their example values must show
each input's layout at the frame's entry, not the layout the graph leaves it with. The differential
cases run a backend that, as compiling backends do, traces the graph with AOT autograd from those
example values (symbolic ones after a recompile with dynamic sizes), then compare outputs and the
inputs after the call (shape, strides, storage offset, values) with eager on twins of the same inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree
from functorch.compile import aot_module_simplified, make_boxed_func

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter, count_ops


@pytest.fixture(autouse=True)
def _inference():
    """Without gradients recorded, where a layout change of an input stays in the graph (while they are
    recorded it is a graph break: see ``test_a_layout_change_of_an_input_is_a_break_while_gradients_are_recorded``)."""
    with torch.no_grad():
        yield


def test_a_layout_change_of_an_input_is_a_break_while_gradients_are_recorded():
    with torch.enable_grad(), capture.observe() as seen:
        compiled = capture.optimize(CompileCounter())(m_twice)
        x = torch.randn(3, 4)
        y = x.clone()
        torch.testing.assert_close(compiled(x), m_twice(y))
    assert _layout(x) == _layout(y)
    reasons = [brk.reason for brk in seen.graph_breaks]
    assert reasons and "unsqueeze_ changes the layout of the graph input" in reasons[0], reasons


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    return tuple(t.shape), tuple(t.stride()), t.storage_offset()


class PlaceholderBackend(CompileCounter):
    """Records whether each placeholder's example value has its input's layout; compiles with AOT autograd
    from the example values when they are symbolic (as a dynamic-shape backend does), else from the inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.mismatches: list[tuple[Any, ...]] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
        super().__call__(gm, example_inputs)
        values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
        symbolic = False
        for value, real in zip(values, example_inputs, strict=True):
            if not isinstance(real, torch.Tensor):
                continue
            hinted = tuple(
                tuple(int(getattr(s, "node", None).hint if isinstance(s, torch.SymInt) else s) for s in part)
                for part in (value.shape, value.stride())
            )
            offset = value.storage_offset()
            symbolic |= any(isinstance(s, torch.SymInt) for s in (*value.shape, *value.stride()))
            offset = int(offset.node.hint) if isinstance(offset, torch.SymInt) else offset
            if (*hinted, offset) != _layout(real):
                self.mismatches.append(((*hinted, offset), _layout(real)))
        inputs = values if symbolic else example_inputs
        return aot_module_simplified(gm, inputs, fw_compiler=lambda g, _: make_boxed_func(g.forward))


def twin(t: torch.Tensor) -> torch.Tensor:
    """A tensor with ``t``'s values and layout in a storage of its own."""
    out = torch.empty(0, dtype=t.dtype)
    out.set_(t.untyped_storage().clone(), t.storage_offset(), t.size(), t.stride())
    return out


def _run(fn: Callable[..., Any], x: torch.Tensor) -> tuple[Any, BaseException | None]:
    try:
        return fn(x), None
    except Exception as err:
        return None, err


def check_calls(fn: Callable[..., Any], inputs: list[torch.Tensor], dynamic: bool | None = None) -> PlaceholderBackend:
    """Call ``fn`` eagerly and compiled on twins of each input in turn; outputs and inputs after must match."""
    backend = PlaceholderBackend()
    compiled = capture.optimize(backend, dynamic=dynamic)(fn)
    for x in inputs:
        eager_x, compiled_x = twin(x), twin(x)
        expected, eager_err = _run(fn, eager_x)
        actual, compiled_err = _run(compiled, compiled_x)
        assert type(compiled_err) is type(eager_err), (compiled_err, eager_err)
        if eager_err is None:
            for a, e in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected), strict=True):
                assert _layout(a) == _layout(e)
                torch.testing.assert_close(a, e)
        assert _layout(compiled_x) == _layout(eager_x), tuple(x.shape)
        torch.testing.assert_close(compiled_x, eager_x)
    assert backend.mismatches == []
    return backend


def m_t(x):
    x.t_()
    return x + 1


def m_unsqueeze_sum(x):
    x.unsqueeze_(0)
    return x.sum(0)


def m_unsqueeze_then_add(x):
    x.unsqueeze_(0)
    x.add_(1)
    return x * 2


def m_squeeze(x):
    return x.squeeze_() * 2


def m_transpose(x):
    x.transpose_(0, 1)
    return x * 2


def m_as_strided(x):
    x.as_strided_((2, 2), (1, 2), 1)
    return x + 1


def m_twice(x):
    x.unsqueeze_(0)
    y = x * 2
    x.squeeze_(0)
    x.t_()
    return y, x.sum(1)


@pytest.mark.parametrize(
    "fn", [m_t, m_unsqueeze_sum, m_unsqueeze_then_add, m_squeeze, m_transpose, m_as_strided, m_twice]
)
def test_a_metadata_change_of_an_argument_is_applied_once_after_a_recompile(fn):
    # The second size makes the sizes dynamic: that graph is traced from the placeholders' example values.
    backend = check_calls(fn, [torch.randn(3, 4), torch.randn(3, 4), torch.randn(5, 6), torch.randn(1, 4)])
    assert backend.frame_count >= 2


@pytest.mark.parametrize("fn", [m_t, m_unsqueeze_sum, m_squeeze, m_transpose])
def test_a_metadata_change_of_an_argument_with_dynamic_sizes(fn):
    check_calls(fn, [torch.randn(3, 4), torch.randn(6, 5)], dynamic=True)


def m_t_across_break(x):
    x.t_()
    y = x * 2
    capture.graph_break()
    return y + x


def test_a_metadata_change_before_a_graph_break():
    backend = check_calls(m_t_across_break, [torch.randn(3, 4), torch.randn(3, 4), torch.randn(5, 6)])
    assert backend.frame_count == 4  # two graphs per size


def test_placeholders_show_the_layout_the_frame_received():
    backend = PlaceholderBackend()
    compiled = capture.optimize(backend, dynamic=True)(m_twice)
    compiled(torch.randn(3, 4))
    (gm,) = backend.graphs
    (placeholder,) = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert placeholder.meta["example_value"].dim() == 2
    assert backend.mismatches == []


def m_squeeze_then_write(x):
    x.squeeze_()
    x *= 2
    return x + 1


def m_view_across_break(x, n):
    v = x[1]
    capture.graph_break()
    x.add_(n)
    return v * 1


def test_a_write_and_a_layout_change_of_one_argument_are_cut_apart():
    backend = check_calls(m_squeeze_then_write, [torch.randn(4, 6)[::2, ::2], torch.randn(8, 10)[::2, ::2]])
    assert all(count_ops(gm) <= 2 for gm in backend.graphs)  # squeeze_ and the write never share a graph


def test_a_write_into_an_argument_another_argument_views_is_not_in_a_graph_reading_both():
    backend = PlaceholderBackend()
    compiled = capture.optimize(backend)(m_view_across_break)
    for size in (1, 2, 3):
        x = torch.randn(3, size)
        eager_x, compiled_x = twin(x), twin(x)
        torch.testing.assert_close(compiled(compiled_x, 5), m_view_across_break(eager_x, 5))
        torch.testing.assert_close(compiled_x, eager_x)
    for gm in backend.graphs:
        names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
        assert not ({"add_"} <= {str(n.target) for n in gm.graph.nodes} and len(names) > 1), names


def _squeeze_an_inference_tensor(x):
    with torch.inference_mode():
        norm = x.norm()
    norm.squeeze_()  # a no-op on a 0-d tensor, but eager refuses it first: an inference tensor outside the mode
    return x + 1


def _aot_eager(gm: torch.fx.GraphModule, inputs: Any) -> Any:
    return aot_module_simplified(gm, inputs, fw_compiler=lambda g, _: make_boxed_func(g.forward))


@pytest.mark.parametrize("backend", [CompileCounter(), _aot_eager], ids=["eager", "aot"])
def test_a_no_op_layout_change_of_an_inference_tensor_outside_inference_mode_raises_as_in_eager(backend):
    """Eager refuses any in-place op on an inference tensor outside inference mode, even ``squeeze_`` of a 0-d
    one; the trace skipped it as a no-op and returned (fuzz a44-0:140)."""
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        _squeeze_an_inference_tensor(torch.randn(3))
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        capture.optimize(backend)(_squeeze_an_inference_tensor)(torch.randn(3))
