"""Inference graphs called without AOT autograd's runtime wrapper only where that wrapper would do nothing.

Each case runs eagerly, through ``compile_fx``, and through ``compile_fx`` with every graph kept in AOT autograd's
wrapper, on clones of the same inputs, with grad mode on and off. It compares values and the inputs after the call
with eager's; which outputs share memory with an input or with each other, whether an output is a view and whether
it requires grad with the wrapped graph's; and checks whether the graph was called straight
(``info["called_directly"]``).
"""

from __future__ import annotations

import pytest
import torch

from dynajit.inductor_lite import _compile, compile_fx, compiled_graphs


def _fresh(a):
    return a + 1, a.sum(0) * 2


def _written_input(a):
    a.mul_(2)
    return a + 1


def _returns_an_input_view(a):
    return a.t(), a * 2


def _returns_an_intermediate_view(a):
    return (a * 2).view(-1)


def _returns_an_input(a):
    return a


def _shares_an_output(a):
    b = a * 2
    return b, b


CASES = [
    (_fresh, True),
    (_written_input, False),
    (_returns_an_input_view, False),
    (_returns_an_intermediate_view, True),  # (the wrapper remakes a view of an intermediate only for autograd)
    (_returns_an_input, False),
    (_shares_an_output, False),
]


def _observed(fn, a):
    outs = fn(a)
    outs = outs if isinstance(outs, tuple) else (outs,)
    ptrs = [a.untyped_storage().data_ptr()]
    shares = []
    for o in outs:
        ptr = o.untyped_storage().data_ptr()
        shares.append(ptrs.index(ptr) if ptr in ptrs else None)
        ptrs.append(ptr)
    return [o.detach() for o in outs], a.detach(), (shares, [(o.requires_grad, o._is_view()) for o in outs])


@pytest.mark.parametrize("grad_enabled", [True, False])
@pytest.mark.parametrize(("fn", "direct"), CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_an_inference_graph_is_called_straight_only_where_nothing_is_lost(fn, direct, grad_enabled, monkeypatch):
    a = torch.arange(6.0).view(2, 3)
    with torch.set_grad_enabled(grad_enabled):
        c = compile_fx(torch.fx.symbolic_trace(fn), [a.clone()])
        values, written, layout = _observed(c, a.clone())
        expected_values, expected_written, _ = _observed(fn, a.clone())
        monkeypatch.setattr(_compile, "direct_inference", lambda *args: None)
        monkeypatch.setattr(_compile, "trace_inference_once", lambda *args: None)
        wrapped = compile_fx(torch.fx.symbolic_trace(fn), [a.clone()])
        *_, wrapped_layout = _observed(wrapped, a.clone())
    torch.testing.assert_close((values, written), (expected_values, expected_written))
    assert layout == wrapped_layout
    assert bool(compiled_graphs(c)[-1].info.get("called_directly")) is direct
    assert not compiled_graphs(wrapped)[-1].info.get("called_directly")


def test_an_input_requiring_grad_compiled_under_no_grad_gives_outputs_without_history_when_grad_is_back():
    # AOT autograd's wrapper runs an inference graph with grad off; called straight, the graph's own aten ops
    # (the matrix product) must not record history either.
    w = torch.randn(3, 4, requires_grad=True)
    x = torch.randn(2, 3)
    gm = torch.fx.symbolic_trace(lambda x, w: (x @ w).relu())
    with torch.no_grad():
        c = compile_fx(gm, [x, w])
        c(x, w)
    assert compiled_graphs(c)[-1].info.get("called_directly")
    out = c(x, w)
    assert not out.requires_grad and out.grad_fn is None
    torch.testing.assert_close(out, (x @ w).relu().detach())


def test_under_autocast_the_graph_keeps_aot_autograds_wrapper():
    a = torch.randn(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        c = compile_fx(torch.fx.symbolic_trace(lambda a: a @ a), [a])
        c(a)
    assert not compiled_graphs(c)[-1].info.get("called_directly")
