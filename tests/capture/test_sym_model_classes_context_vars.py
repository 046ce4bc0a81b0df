"""contextvars.ContextVar get/set/reset in traced code (transformers' output capturing), eager vs compiled.

Each call runs in a copy of the current context, eagerly and compiled, and the
variable's value after the call is compared too: the writes are replayed on the
real variable, so the context must end as eager leaves it.
"""

import contextvars
import re

import pytest
import torch
from torch import nn

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter

SCALE: contextvars.ContextVar = contextvars.ContextVar("scale", default=None)
NO_DEFAULT: contextvars.ContextVar = contextvars.ContextVar("no_default")
COLLECTOR: contextvars.ContextVar = contextvars.ContextVar("collector", default=None)

_UNSET = object()
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


def in_context(fn, *args, setup=None):
    """Run ``fn`` in a fresh copy of the context; return its result (or exception) and the variables after."""
    ctx = contextvars.copy_context()

    def run():
        if setup is not None:
            setup()
        try:
            result = fn(*args)
        except Exception as exc:  # compared with the compiled run's
            result = exc
        return result, SCALE.get(_UNSET), NO_DEFAULT.get(_UNSET)

    return ctx.run(run)


def compare(fn, *args, graphs=1, setup=None, fullgraph=False):
    counter = CompileCounter()
    compiled = capture.optimize(counter, fullgraph=fullgraph)(fn)
    expected = in_context(fn, *[a.clone() if isinstance(a, torch.Tensor) else a for a in args], setup=setup)
    actual = in_context(compiled, *args, setup=setup)
    for got, want in zip(actual, expected, strict=True):
        if isinstance(want, Exception):  # the same error (its message names tokens by address)
            assert type(got) is type(want), (got, want)
            assert _ADDRESS.sub("", str(got)) == _ADDRESS.sub("", str(want))
        elif want is _UNSET or isinstance(want, (str, type(None))):
            assert got is want or got == want, (got, want)
        else:
            torch.testing.assert_close(got, want)
    assert counter.frame_count == graphs, counter
    return counter


def set_then_reset(t):
    token = SCALE.set(2)
    y = t * SCALE.get()
    SCALE.reset(token)
    return y + (SCALE.get() is None)


def test_set_get_reset_is_one_graph():
    capture.reset()
    compare(set_then_reset, torch.randn(4), fullgraph=True)


def set_only(t):
    SCALE.set(3)
    NO_DEFAULT.set("x")
    return t * SCALE.get()


def test_set_is_replayed_on_the_real_variable():
    capture.reset()
    compare(set_only, torch.randn(4), fullgraph=True)


def read_entry_value(t):
    t = t + 1
    scale = SCALE.get()
    return t if scale is None else t * scale


def test_reads_are_guarded_on_the_current_value():
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(read_entry_value)
    x = torch.randn(4)
    for value in (None, 2, 2, 5, None):
        expected = in_context(read_entry_value, x, setup=lambda v=value: SCALE.set(v))
        actual = in_context(compiled, x, setup=lambda v=value: SCALE.set(v))
        torch.testing.assert_close(actual[0], expected[0])
    assert counter.frame_count == 3, counter  # None, 2, 5


def read_tensor_value(t):
    t = t * 2
    return t + SCALE.get()


def test_a_tensor_held_by_the_variable_is_a_graph_input():
    capture.reset()
    compare(read_tensor_value, torch.randn(4), setup=lambda: SCALE.set(torch.ones(4)))


def get_defaults(t):
    a = NO_DEFAULT.get(7)
    b = SCALE.get()
    return t * a + (b is None)


def test_defaults_of_the_call_and_of_the_variable():
    capture.reset()
    compare(get_defaults, torch.randn(4), fullgraph=True)


def get_missing(t):
    y = t + 1
    return y * NO_DEFAULT.get()


def test_a_variable_without_value_raises_lookup_error():
    capture.reset()
    compare(get_missing, torch.randn(4), graphs=1)


def reset_with_foreign_token(t):
    y = t + 1
    token = SCALE.set(2)
    y = y * 2
    NO_DEFAULT.reset(token)
    return y


def reset_twice(t):
    y = t + 1
    token = SCALE.set(2)
    y = y * 2
    SCALE.reset(token)
    SCALE.reset(token)
    return y


@pytest.mark.parametrize("fn", [reset_with_foreign_token, reset_twice])
def test_a_wrong_token_is_refused_as_in_eager(fn):
    capture.reset()
    compare(fn, torch.randn(4), graphs=1)


def token_across_a_break(t):
    token = SCALE.set(4)
    y = t * SCALE.get()
    capture.graph_break()
    y = y + SCALE.get()
    SCALE.reset(token)
    return y * 2, SCALE.get()


def test_a_token_made_before_a_break_resets_after_it():
    capture.reset()
    compare(token_across_a_break, torch.randn(4), graphs=2)


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        out = torch.relu(self.lin(x))
        _collect(out)
        return out


def _collect(output):
    collected = COLLECTOR.get()
    if collected is not None and "hidden" in collected:
        collected["hidden"].append(output)


class Model(nn.Module):
    """transformers' output capturing: layers append to a collector that the model sets around forward."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(Layer() for _ in range(2))

    def forward(self, x, keep):
        collected = {"hidden": []} if keep else {}
        token = COLLECTOR.set(collected)
        try:
            for layer in self.layers:
                x = layer(x)
        finally:
            COLLECTOR.reset(token)
        return x, tuple(collected.get("hidden", ()))


@pytest.mark.parametrize("keep", [True, False])
def test_output_capturing_hooks_are_one_graph(keep):
    capture.reset()
    torch.manual_seed(0)
    model = Model()
    compare(model, torch.randn(2, 4), keep, fullgraph=True)


def write_after_reading_an_object(t):
    held = SCALE.get()
    SCALE.set(None)
    return t + held


def test_writing_after_reading_an_object_breaks_and_stays_right():
    capture.reset()
    with capture.observe() as seen:
        compare(write_after_reading_an_object, torch.randn(4), setup=lambda: SCALE.set(torch.ones(4)), graphs=1)
    reasons = [brk.reason for brk in seen.graph_breaks]
    assert reasons == ["writing a ContextVar after reading an object from it in the same graph"], reasons


GET_SCALE = SCALE.get
SET_SCALE = SCALE.set


def bound_methods_held_in_globals(t):
    token = SET_SCALE(5)
    y = t * GET_SCALE()
    SCALE.reset(token)
    return y


def test_bound_methods_of_a_variable():
    capture.reset()
    compare(bound_methods_held_in_globals, torch.randn(4), fullgraph=True)
