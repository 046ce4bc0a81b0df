"""Regression: a resume function that breaks again must get each live local in its own argument.

A resume function's prologue reads its saved stack (``___stack0``...). When the
function has a try block, the live-locals analysis counted every read in the code,
the prologue's included, so a second break in the resume function passed the old
stack slots as live locals under the same names as its new stack slots: duplicate
argument names, and every later argument (``args`` here) shifted by one slot.
"""

import pytest
import torch

import dynajit.capture as capture

# A failed conversion falls back to eager with a RuntimeWarning: make it a failure.
pytestmark = pytest.mark.filterwarnings("error:dynajit:RuntimeWarning")


def r_break_twice_in_loop_with_try(x, *args, **kwargs):
    # Breaks with the loop's iterator on the stack, twice: the second break is in a resume function.
    for _name in ["a", "b"]:
        x = x + 1
        capture.graph_break()
        x = x * 2
        capture.graph_break()
        x = x - len(args) - len(kwargs)
    try:  # any try block: the analysis then treats every read in the code as live
        x = x + 1
    except ValueError:
        pass
    # More locals than the duplicated names: the code assembles, with the arguments shifted.
    a1 = x + 1
    a2 = a1 + 1
    a3 = a2 + 1
    a4 = a3 + 1
    return a4, args, kwargs


def test_resume_of_resume_in_loop_keeps_varargs(check, t):
    check(r_break_twice_in_loop_with_try, t(3), 10, 20, kwargs={"k": 1}, calls=2)


def make_wrapper(func):
    # The transformers shape: a closure over ``func`` taking ``*args``, breaking on ``func.__code__``.
    def wrapper(self, *args, **kwargs):
        for arg_name in ["use_cache", "other"]:
            arg_index = None
            if arg_name in func.__code__.co_varnames:
                arg_index = func.__code__.co_varnames.index(arg_name) - 1
            if arg_index is not None and len(args) > arg_index and args[arg_index] is not None:
                kwargs.setdefault("seen", arg_index)
        try:
            return func(self, *args, **kwargs)
        finally:
            kwargs.pop("seen", None)

    return wrapper


class _Model(torch.nn.Module):
    @make_wrapper
    def forward(self, x, mask=None, use_cache=None, seen=None):
        return x + 1 if seen is None else x * seen


def test_closure_wrapper_breaking_on_code_attribute(check, t):
    model = _Model()
    check(model.forward, t(3), None, True, calls=2)
    check(model.forward, t(3), calls=2)


def r_pair_of_late_locals_after_breaks(x0):
    # (the fuzzer's program a125:354) 3.13 reads `v11` and `v8` with one instruction, four bits per local; the
    # resume function after the dict comprehension's break numbers its locals anew, `v8` past 15, and the pair
    # loaded another local: the call returned the comprehension's dict where eager returns a tensor
    v1 = x0
    v2 = v1 * 1
    comp3 = [print(end="") or v2 * (k4 + 1) for k4 in range(1)]
    v4 = comp3[-1]
    tup5 = (v4, v2)
    _p5, _q5 = tup5
    v6 = tup5[0]
    comp7 = {k8: capture.graph_break() or v6 + k8 for k8 in range(2)}
    v8 = comp7[0] * len(comp7)
    v11 = v1
    return (v11, v8)


def test_a_pair_of_locals_read_together_past_the_fifteenth_local(check, t):
    check(r_pair_of_late_locals_after_breaks, t(1), calls=2)
