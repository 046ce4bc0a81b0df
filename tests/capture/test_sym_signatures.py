"""Root frames with every kind of parameter, walrus, asserts, super() and other less common constructs."""

import pytest
import torch
from sym_asserts import assert_const, assert_tensor
from torch import nn


def sig_defaults(x, scale=2.0, *, shift=1.0):
    return x * scale + shift


def sig_varargs(x, *rest, **opts):
    out = x
    for r in rest:
        out = out + r
    return out * opts.get("k", 1)


def sig_posonly(x, y, /, z=None):
    return x - y if z is None else x - y + z


def walrus(x):
    if (n := x.shape[0]) > 2:
        return x * n
    return x


def dict_iteration(x):
    d = {"a": 1, "b": 2}
    for key in d:
        x = x + d[key]
    return x


def nonidentifier_keys(x):
    d = {"my key": x, 3: x * 2}
    return d["my key"] + d[3]


def gen_function(v):
    yield v
    yield v * 2


def calls_generator(x):
    return sum(gen_function(x)) + 1


def deep_inlining(x):
    def a(v):
        return b(v) + 1

    def b(v):
        return c(v) * 2

    def c(v):
        return v.sin()

    return a(x)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x)


class Child(Base):
    def forward(self, x):
        return super().forward(x) * 2


def run_child(m, x):
    return m(x)


def test_defaults_and_keyword_only(check, t):
    check(sig_defaults, t(3), graphs=1)
    check(sig_defaults, t(3), 3.0, kwargs={"shift": -1.0}, graphs=1)


def test_varargs_and_kwargs(check, t):
    check(sig_varargs, t(3), t(3), t(3), kwargs={"k": 3}, graphs=1)


def test_positional_only(check, t):
    check(sig_posonly, t(3), t(3), graphs=1)
    check(sig_posonly, t(3), t(3), t(3), graphs=1)


@pytest.mark.parametrize(
    "fn", [walrus, assert_const, dict_iteration, nonidentifier_keys, deep_inlining], ids=lambda f: f.__name__
)
def test_less_common_constructs(check, t, fn):
    check(fn, t(3), graphs=1)


def test_assert_on_tensor(check, t):
    check(assert_tensor, t(3))
    check(assert_tensor, t(3) - 1000)


def test_assert_failure_is_the_eager_error(check, t):
    check(assert_const, t(3, 3))


def test_generator_call(check, t):
    check(calls_generator, t(3))


def test_super_forward(check, t):
    torch.manual_seed(0)
    check(run_child, Child(), t(2, 3))


class Dynamic:
    def __getattr__(self, name):
        if name == "double":
            return lambda v: v * 2
        raise AttributeError(name)


def method_via_getattr(x, obj):
    y = x + 1
    return obj.double(y) - 1


def try_without_break(x):
    try:
        y = x + 1
    except Exception:
        y = x
    return y * 2


def with_unsupported_manager(x):
    import contextlib

    with contextlib.nullcontext():
        y = x + 1
    return y


def test_a_method_from_a_python_getattr_is_traced(check, t):
    check(method_via_getattr, t(3), Dynamic(), graphs=1)


def test_try_block_without_break_is_traced(check, t):
    check(try_without_break, t(3), graphs=1)


def test_unsupported_context_manager(check, t):
    check(with_unsupported_manager, t(3))
