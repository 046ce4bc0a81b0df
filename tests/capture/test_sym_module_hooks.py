"""A module's forward hooks and pre-hooks are traced into the graph: nn.Module's own ``_call_impl`` is inlined.

Each hook dict's keys are guarded, so a hook added or removed recompiles; each hook is guarded like any function
the trace calls. Feature extraction (a hook appending the activation to a list) appends once per call, as in
eager. Backward hooks and global module hooks still leave the module call to Python.
"""

from __future__ import annotations

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def _run(fn, x, counter):
    compiled = capture.optimize(counter)(fn)
    with capture.observe() as seen:
        actual = compiled(x)
    return actual, [brk.reason for brk in seen.graph_breaks]


def test_forward_hooks_and_pre_hooks_are_traced_in_one_graph(t):
    capture.reset()
    model, features = _model(), []
    model[0].register_forward_pre_hook(lambda m, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)
    model[1].register_forward_hook(lambda m, args, out: features.append(out.detach()))
    model[2].register_forward_hook(lambda m, args, out: out - 1)
    x = t(5, 3)
    expected = model(x)
    counter = CompileCounter()
    actual, breaks = _run(model, x, counter)
    torch.testing.assert_close(actual, expected)
    assert not breaks and counter.frame_count == 1
    assert len(features) == 2 and torch.equal(features[0], features[1])


def test_a_hook_added_or_removed_recompiles(t):
    capture.reset()
    model = _model()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(model)
    x = t(2, 3)
    handle = model[2].register_forward_hook(lambda m, args, out: out * 10)
    torch.testing.assert_close(compiled(x), model(x))
    second = model[2].register_forward_hook(lambda m, args, out: out + 3)
    torch.testing.assert_close(compiled(x), model(x))
    handle.remove()
    second.remove()
    torch.testing.assert_close(compiled(x), model(x))
    assert counter.frame_count == 3


def test_backward_hooks_leave_the_call_to_python(t):
    capture.reset()
    model, grads = _model(), []
    model[2].register_full_backward_hook(lambda m, grad_in, grad_out: grads.append(grad_out[0]))
    x = t(2, 3).requires_grad_()
    expected = model(x)
    expected.sum().backward()
    actual, breaks = _run(model, x, CompileCounter())
    actual.sum().backward()
    torch.testing.assert_close(actual, expected)
    assert len(grads) == 2 and torch.equal(grads[0], grads[1])
    assert any("backward hooks" in reason for reason in breaks)


def test_a_recurrent_module_with_a_forward_hook_still_runs_in_python(t):
    # Its fused kernel is not traced (see modules.py); the hook changes nothing of that.
    capture.reset()
    rnn = torch.nn.LSTM(3, 4, batch_first=True)
    rnn.register_forward_hook(lambda m, args, out: (out[0] * 2, out[1]))
    x = t(2, 5, 3)
    actual, breaks = _run(lambda v: rnn(v)[0].sum(), x, CompileCounter())
    torch.testing.assert_close(actual, rnn(x)[0].sum())
    assert any("LSTM modules run eagerly" in reason for reason in breaks)
