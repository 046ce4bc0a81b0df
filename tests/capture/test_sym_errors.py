"""User exceptions surface as in eager; fullgraph turns a graph break into an error naming reason and line."""

import pytest

import dynajit.capture as capture
from dynajit.capture._frame import Unsupported
from dynajit.capture.testing import CompileCounter


def e_shape_mismatch(x, y):
    z = x * 2
    return z @ y


def e_key_error(x, d):
    return x + d["missing"]


def e_index_error(x):
    items = [x]
    return items[3]


def e_raise(x):
    y = x + 1
    if y.shape[0] > 2:
        raise ValueError(f"too long: {y.shape[0]}")
    return y


def e_type_error_call(x):
    return helper(x, 1, 2)


def helper(a, b):
    return a + b


def e_unbound_local(x, flag):
    if flag:
        y = x
    return y + 1


def e_zero_division(x, n):
    return x * (1 / n)


def e_attribute_error(x):
    return x.no_such_method()


CASES = [
    (e_shape_mismatch, lambda t: (t(2, 3), t(2, 3))),
    (e_key_error, lambda t: (t(2), {"a": 1})),
    (e_index_error, lambda t: (t(2),)),
    (e_raise, lambda t: (t(4),)),
    (e_type_error_call, lambda t: (t(2),)),
    (e_unbound_local, lambda t: (t(2), False)),
    (e_zero_division, lambda t: (t(2), 0)),
    (e_attribute_error, lambda t: (t(2),)),
]


@pytest.mark.parametrize("fn,make", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_user_error_is_the_eager_error(check, t, fn, make):
    check(fn, *make(t))


def unsupported_in_graph(x):
    y = x + 1
    LOG.append(id(y))
    return y


LOG = []


def test_fullgraph_break_names_reason_and_line(t):
    compiled = capture.optimize(CompileCounter(), fullgraph=True)(unsupported_in_graph)
    with pytest.raises(Unsupported) as info:
        compiled(t(3))
    message = str(info.value)
    assert "id" in message
    assert f"{__file__}:{unsupported_in_graph.__code__.co_firstlineno + 2}" in message


def test_fullgraph_tensor_branch(t):
    def branchy(x):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(Unsupported, match="data-dependent"):
        capture.optimize(CompileCounter(), fullgraph=True)(branchy)(t(3))


def test_fullgraph_without_breaks_compiles(check, t):
    check(e_shape_mismatch, t(2, 3), t(3, 2), graphs=1, fullgraph=True)


@pytest.mark.parametrize("fn,make", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_fullgraph_user_error_is_the_eager_error(check, t, fn, make):
    check(fn, *make(t), fullgraph=True, calls=2)
