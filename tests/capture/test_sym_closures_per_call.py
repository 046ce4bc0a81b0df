"""Functions made anew on every call and live across a graph break: guarded by their code, not their identity.

The resume function after the break takes such a function as an argument; an identity guard would fail on
the next call's new function (and its entry die with the old one), compiling again at every call.
"""

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def _run(fn, calls):
    """``fn`` compiled, called on each argument tuple of ``calls`` beside eager; the number of frames compiled."""
    capture.reset()
    counter = CompileCounter()
    compiled = capture.optimize(counter)(fn)
    for args in calls:
        expected = fn(*args)
        actual = compiled(*args)
        torch.testing.assert_close(actual, expected)
    return counter.frame_count


def scaled_twice(x):
    def scale(v):
        return v * 3

    y = scale(x)
    print(end="")  # a graph break: the resume function takes `scale`
    return scale(y)


def test_a_closure_made_per_call_compiles_once():
    assert _run(scaled_twice, [(torch.randn(3),) for _ in range(6)]) == 2  # the frame and its resume function


def by_captured(x, k):
    def scale(v):
        return v * k

    y = scale(x)
    print(end="")
    return scale(y)


def test_what_a_closure_holds_is_guarded_through_its_cell():
    calls = [(torch.randn(3), 2), (torch.randn(3), 2), (torch.randn(3), 5), (torch.randn(3), 5)]
    assert _run(by_captured, calls) <= 4  # a new value of `k` recompiles (or becomes dynamic), never a wrong one
    w = torch.randn(3, 3)
    assert _run(lambda x: by_captured(x, w), [(torch.randn(3, 3),) for _ in range(4)]) <= 3


def counted(x):
    n = 0

    def inc():
        nonlocal n
        n += 1
        return n

    def get():
        return n

    inc()
    print(end="")  # the resume function takes both closures, which share the cell of `n`
    inc()
    return x * get()


def test_closures_sharing_a_cell_see_each_others_writes():
    assert _run(counted, [(torch.randn(3),) for _ in range(5)]) <= 3


SEEN = []


def compared(x):
    def f(v):
        return v + 1

    SEEN.append(f)
    print(end="")
    return f(x) * (2 if f is SEEN[-1] else 3) * (2 if f is SEEN[0] else 5)


def test_a_closure_compared_by_identity_is_guarded_by_identity():
    SEEN.clear()
    capture.reset()
    compiled = capture.optimize(CompileCounter())(compared)
    x = torch.randn(3)
    # the first call's `f` is SEEN[0] (4x), later calls' are not (10x): the answer depends on which object it is
    for factor in (4, 10, 10, 10):
        torch.testing.assert_close(compiled(x), (x + 1) * factor)


def with_default(x, k):
    def scale(v, factor=k):
        return v * factor

    y = scale(x)
    print(end="")
    return scale(y)


def test_a_closures_defaults_are_guarded():
    _run(with_default, [(torch.randn(3), 2), (torch.randn(3), 7), (torch.randn(3), 7)])


def fresh_attribute(x, tag):
    def f(v):
        return v + 1

    if tag:
        f.tag = 4
    print(end="")
    return f(x) * getattr(f, "tag", 1)


def test_a_closure_with_attributes_is_guarded():
    _run(fresh_attribute, [(torch.randn(3), False), (torch.randn(3), True), (torch.randn(3), False)])


SHARE = [True]


def _make_counter():
    c = 0

    def inc():
        nonlocal c
        c += 1
        return c

    def get():
        return c

    return inc, get


@capture.disable
def _made_in_python():
    """Two closures sharing a cell, or not (SHARE[0]): made in Python, where no guard of the caller sees which."""
    inc, get = _make_counter()
    if not SHARE[0]:
        _, get = _make_counter()  # reads a cell of its own: `inc` writes another
    return inc, get


def pair(x):
    inc, get = _made_in_python()
    print(end="")  # the resume function takes both closures
    inc()
    return x * get()


def test_which_closures_share_a_cell_is_guarded():
    for order in ((True, False, True), (False, True, False)):
        capture.reset()
        compiled = capture.optimize(CompileCounter())(pair)
        for shared in order:
            SHARE[0] = shared
            x = torch.randn(3)
            torch.testing.assert_close(compiled(x), x * (1 if shared else 0))
