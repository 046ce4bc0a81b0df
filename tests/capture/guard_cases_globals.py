"""Guard-soundness cases (registered in guard_cases.CASES): state outside the call's arguments.

This module's globals (which the cases rebind; test_sym_guard_soundness's restore_state fixture restores them),
closure cells, defaults, constants held by objects, the process environment and torch's global state.
"""

from __future__ import annotations

import enum
import functools
import os
import types

import torch
from guard_cases import Holder, _ones, case

# ----------------------------------------------------------------- globals, closures, defaults

G_SCALE = 2
G_FLAG = False
G_NAME = "relu"


def _g_helper(x):
    return x + 1


@case
def global_int_rebound():
    globals()["G_SCALE"] = 2

    def f(x):
        return x * G_SCALE

    return f, _ones(2), lambda: globals().__setitem__("G_SCALE", 3)


@case
def global_bool_rebound():
    globals()["G_FLAG"] = False

    def f(x):
        return x + 1 if G_FLAG else x - 1

    return f, _ones(2), lambda: globals().__setitem__("G_FLAG", True)


@case
def global_str_rebound():
    globals()["G_NAME"] = "relu"

    def f(x):
        return getattr(torch, G_NAME)(x - 0.5)

    return f, _ones(2), lambda: globals().__setitem__("G_NAME", "sigmoid")


@case
def global_function_rebound():
    globals()["_g_helper"] = lambda x: x + 1

    def f(x):
        return _g_helper(x) * 2

    return f, _ones(2), lambda: globals().__setitem__("_g_helper", lambda x: x - 1)


@case
def closure_cell_int_changed():
    scale = 2

    def f(x):
        return x * scale

    def mutate():
        nonlocal scale
        scale = 9

    return f, _ones(2), mutate


@case
def closure_cell_function_changed():
    act = torch.relu

    def f(x):
        return act(x - 0.5)

    def mutate():
        nonlocal act
        act = torch.sigmoid

    return f, _ones(2), mutate


@case
def closure_cell_none_to_tensor():
    bias = None

    def f(x):
        return x * 1 if bias is None else x + bias

    def mutate():
        nonlocal bias
        bias = torch.full((2,), 3.0)

    return f, _ones(2), mutate


@case
def default_argument_changed():
    def f(x, scale=2):
        return x * scale

    return f, _ones(2), lambda: setattr(f, "__defaults__", (5,))


@case
def float_constant_changed_to_int():
    holder = Holder(v=2.0)

    def f(x):
        return (x.long() * holder.v).dtype == torch.float32, x + 1

    return f, _ones(2), lambda: setattr(holder, "v", 2)


@case
def str_constant_changed():
    holder = Holder(mode="sum")

    def f(x):
        return x.sum() if holder.mode == "sum" else x.mean()

    return f, _ones(2), lambda: setattr(holder, "mode", "mean")


@case
def enum_member_changed():
    class Mode(enum.Enum):
        A = 1
        B = 2

    holder = Holder(mode=Mode.A)

    def f(x):
        return x + 1 if holder.mode is Mode.A else x - 1

    return f, _ones(2), lambda: setattr(holder, "mode", Mode.B)


@case
def python_module_attr_added():
    namespace = types.ModuleType("namespace")

    def f(x):
        return x + getattr(namespace, "OFFSET", 0)

    return f, _ones(2), lambda: setattr(namespace, "OFFSET", 10)


@case
def partial_argument_changed():
    def scale(x, k):
        return x * k

    holder = Holder(fn=functools.partial(scale, k=2))

    def f(x):
        return holder.fn(x)

    return f, _ones(2), lambda: setattr(holder, "fn", functools.partial(scale, k=3))


@case
def partial_keyword_changed_in_place():
    def scale(x, k):
        return x * k

    fn = functools.partial(scale, k=2)

    def f(x):
        return fn(x)

    return f, _ones(2), lambda: fn.keywords.__setitem__("k", 3)


@case
def helper_code_swapped():
    def helper(x):
        return x + 1

    def f(x):
        return helper(x) * 2

    def swap():
        helper.__code__ = (lambda x: x - 1).__code__

    return f, _ones(2), swap


@case
def keyword_only_default_changed():
    def f(x, *, k=2):
        return x * k

    return f, _ones(2), lambda: setattr(f, "__kwdefaults__", {"k": 6})


@case
def keyword_only_default_changed_in_place():
    def f(x, *, k=2):
        return x * k

    return f, _ones(2), lambda: f.__kwdefaults__.__setitem__("k", 6)


@case
def one_of_two_defaults_changed():
    def f(x, a=1, b=2):
        return x * a + b

    return f, _ones(2), lambda: setattr(f, "__defaults__", (1, 7))


# ----------------------------------------------------------------- the process environment


@case
def environment_variable_set():
    os.environ.pop("DYNAJIT_SOUNDNESS_FLAG", None)

    def f(x):
        return x + 1 if os.environ.get("DYNAJIT_SOUNDNESS_FLAG") == "1" else x - 1

    return f, _ones(2), lambda: os.environ.__setitem__("DYNAJIT_SOUNDNESS_FLAG", "1")


@case
def environment_variable_changed():
    os.environ["DYNAJIT_SOUNDNESS_SCALE"] = "2"

    def f(x):
        return x * int(os.environ["DYNAJIT_SOUNDNESS_SCALE"])

    return f, _ones(2), lambda: os.environ.__setitem__("DYNAJIT_SOUNDNESS_SCALE", "5")


# ----------------------------------------------------------------- global torch state


@case
def grad_mode_changed():
    def f(x):
        return x * 2 if torch.is_grad_enabled() else x + 100

    def mutate():
        torch.set_grad_enabled(False)

    return f, _ones(2), mutate


@case
def deterministic_algorithms_switched_on():
    torch.use_deterministic_algorithms(False)

    def f(x):
        return x * (3 if torch.are_deterministic_algorithms_enabled() else 2)

    return f, _ones(2), lambda: torch.use_deterministic_algorithms(True)


@case
def default_dtype_changed():
    def f(x):
        return x + torch.ones(2)

    def mutate():
        torch.set_default_dtype(torch.float64)

    return f, _ones(2), mutate
