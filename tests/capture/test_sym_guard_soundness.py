"""Guard soundness: after compiling, change ONE fact the trace read; the compiled call must give eager's answer.

Each case builds a small program and the state it reads, and a mutation of one fact: an attribute added or
removed (object, class, module, tensor), a global rebound, a closure cell changed, a type swapped, a constant
changed, a dict key added or removed, a list length changed, a module's training flag, a tensor's dtype, shape
or requires_grad, ... The harness runs eagerly and compiled before the mutation, checks that the mutation
changes eager's answer (so the case tests something), then checks that compiled == eager after it: the entry
either recompiled or still answers right.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import os
import types
from collections.abc import Callable
from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter

Program = tuple[Callable[..., Any], Callable[[], tuple[Any, ...]], Callable[[], None]]
CASES: dict[str, Callable[[], Program]] = {}


def case(setup: Callable[[], Program]) -> Callable[[], Program]:
    """Register ``setup``: it returns (program, a maker of fresh arguments, the mutation)."""
    CASES[setup.__name__] = setup
    return setup


class Holder:
    """A plain object holding attributes (SimpleNamespace reads run in C: a graph break, testing nothing)."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


def _ones(*shape: int) -> Callable[[], tuple[Any, ...]]:
    return lambda: (torch.ones(*shape),)


# ----------------------------------------------------------------- attributes of objects and classes


@case
def attr_added_to_object_read_with_getattr_default():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x + 7 if getattr(cfg, "just_add_7", False) else x - 1

    return f, _ones(2), lambda: setattr(cfg, "just_add_7", True)


@case
def attr_removed_from_object():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 2.0

    def f(x):
        return x * getattr(cfg, "scale", 10.0)

    return f, _ones(2), lambda: delattr(cfg, "scale")


@case
def attr_added_to_object_tested_with_hasattr():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x + 1 if hasattr(cfg, "enabled") else x - 1

    return f, _ones(2), lambda: setattr(cfg, "enabled", 0)


@case
def attr_value_changed_on_object():
    class Cfg:
        scale = 1

    cfg = Cfg()
    cfg.scale = 2

    def f(x):
        return x * cfg.scale

    return f, _ones(2), lambda: setattr(cfg, "scale", 3)


@case
def attr_added_to_class():
    class Cfg:
        pass

    cfg = Cfg()

    def f(x):
        return x * getattr(cfg, "factor", 2)

    return f, _ones(2), lambda: setattr(Cfg, "factor", 5)


@case
def class_attr_changed():
    class Cfg:
        eps = 1.0

    cfg = Cfg()

    def f(x):
        return x + cfg.eps

    return f, _ones(2), lambda: setattr(Cfg, "eps", 4.0)


@case
def instance_attr_shadows_class_attr():
    class Cfg:
        eps = 1.0

    cfg = Cfg()

    def f(x):
        return x + cfg.eps

    return f, _ones(2), lambda: setattr(cfg, "eps", 5.0)


@case
def instance_attr_shadows_method():
    class Scaler:
        def factor(self):
            return 2

    s = Scaler()

    def f(x):
        return x * s.factor()

    return f, _ones(2), lambda: setattr(s, "factor", lambda: 3)


@case
def method_replaced_on_class():
    class Scaler:
        def factor(self):
            return 2

    s = Scaler()

    def f(x):
        return x * s.factor()

    return f, _ones(2), lambda: setattr(Scaler, "factor", lambda self: 4)


@case
def property_replaced_on_class():
    class Box:
        @property
        def size(self):
            return 2

    b = Box()

    def f(x):
        return x * b.size

    return f, _ones(2), lambda: setattr(Box, "size", property(lambda self: 6))


@case
def object_type_swapped():
    class A:
        def k(self):
            return 1

    class B:
        def k(self):
            return 2

    holder = Holder(obj=A())

    def f(x):
        return x * holder.obj.k()

    return f, _ones(2), lambda: setattr(holder, "obj", B())


@case
def isinstance_of_swapped_object():
    class Base:
        pass

    class Child(Base):
        pass

    holder = Holder(obj=Base())

    def f(x):
        return x + 1 if isinstance(holder.obj, Child) else x - 1

    return f, _ones(2), lambda: setattr(holder, "obj", Child())


@case
def slot_attribute_set_later():
    class Slotted:
        __slots__ = ("value",)

    s = Slotted()

    def f(x):
        return x * getattr(s, "value", 1)

    return f, _ones(2), lambda: setattr(s, "value", 7)


@case
def dataclass_field_changed():
    @dataclasses.dataclass
    class Options:
        scale: float = 1.0
        shift: int = 0

    opts = Options()

    def f(x):
        return x * opts.scale + opts.shift

    return f, _ones(2), lambda: setattr(opts, "shift", 3)


@case
def instance_dict_key_added():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.a = 1

    def f(x):
        return x + len(cfg.__dict__)

    return f, _ones(2), lambda: setattr(cfg, "b", 2)


@case
def aliased_object_one_path_rebound():
    class Cfg:
        pass

    cfg = Cfg()
    cfg.scale = 2
    holder = Holder(a=cfg, b=cfg)

    def f(x):
        return x * holder.a.scale + holder.b.scale

    def mutate():
        other = Cfg()
        other.scale = 10
        holder.b = other

    return f, _ones(2), mutate


# ----------------------------------------------------------------- tensors


@case
def tensor_python_attr_added():
    y = torch.ones(2)

    def f(x):
        return x + 1 if hasattr(x, "test") else x - 1

    return f, lambda: (y,), lambda: setattr(y, "test", None)


@case
def tensor_python_attr_changed():
    y = torch.ones(2)
    y.scale = 2

    def f(x):
        return x * x.scale

    return f, lambda: (y,), lambda: setattr(y, "scale", 5)


@case
def tensor_dtype_changed():
    state = {"dtype": torch.float32}

    def f(x):
        return x * 2 if x.dtype == torch.float32 else x + 100

    return f, lambda: (torch.ones(2, dtype=state["dtype"]),), lambda: state.update(dtype=torch.float64)


@case
def tensor_shape_changed():
    state = {"n": 2}

    def f(x):
        return x.sum() * x.shape[0]

    return f, lambda: (torch.ones(state["n"]),), lambda: state.update(n=5)


@case
def tensor_rank_changed():
    state = {"shape": (4,)}

    def f(x):
        return x + x.dim()

    return f, lambda: (torch.ones(state["shape"]),), lambda: state.update(shape=(2, 2))


@case
def tensor_requires_grad_changed():
    state = {"grad": False}

    def f(x):
        return x * 2 if x.requires_grad else x + 100

    return (
        f,
        lambda: (torch.ones(2, requires_grad=state["grad"]),),
        lambda: state.update(grad=True),
    )


@case
def tensor_contiguity_changed():
    state = {"t": False}

    def f(x):
        return x + 1 if x.is_contiguous() else x - 1

    def make():
        base = torch.ones(3, 4)
        return (base.t() if state["t"] else base,)

    return f, make, lambda: state.update(t=True)


@case
def tensor_argument_aliasing_changed():
    state = {"same": False}

    def f(x, y):
        x.add_(1)
        return y * 1

    def make():
        a = torch.ones(2)
        return (a, a) if state["same"] else (a, a.clone())

    return f, make, lambda: state.update(same=True)


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


# ----------------------------------------------------------------- containers


@case
def dict_key_added():
    d = {"a": 1}

    def f(x):
        return x + 1 if "b" in d else x - 1

    return f, _ones(2), lambda: d.__setitem__("b", 2)


@case
def dict_key_removed():
    d = {"a": 1, "b": 2}

    def f(x):
        return x + d.get("b", 10)

    return f, _ones(2), lambda: d.pop("b")


@case
def dict_value_changed():
    d = {"a": 1}

    def f(x):
        return x * d["a"]

    return f, _ones(2), lambda: d.__setitem__("a", 4)


@case
def dict_keys_view_after_key_added():
    d = {"a": 1}

    def f(x):
        return x + len(d.keys())

    return f, _ones(2), lambda: d.__setitem__("z", 0)


@case
def list_length_changed():
    items = [1, 2]

    def f(x):
        for v in items:
            x = x + v
        return x

    return f, _ones(2), lambda: items.append(3)


@case
def list_element_changed():
    items = [1, 2]

    def f(x):
        return x * items[1]

    return f, _ones(2), lambda: items.__setitem__(1, 5)


@case
def tuple_argument_length_changed():
    state = {"t": (1, 2)}

    def f(x, t):
        return x + len(t)

    return f, lambda: (torch.ones(2), state["t"]), lambda: state.update(t=(1, 2, 3))


@case
def ordered_dict_order_changed():
    d = collections.OrderedDict(a=1, b=2)

    def f(x):
        return x * next(iter(d.values()))

    return f, _ones(2), lambda: d.move_to_end("a")


@case
def size_argument_swapped_for_tuple():
    state = {"s": torch.Size([2])}

    def f(x, s):
        return x + 1 if isinstance(s, torch.Size) else x - 1

    return f, lambda: (torch.ones(2), state["s"]), lambda: state.update(s=(2,))


# ----------------------------------------------------------------- modules


@case
def module_training_flag():
    drop = torch.nn.Dropout(0.5)

    def f(x):
        return x * 2 if drop.training else x + 100

    return f, _ones(2), lambda: drop.eval()


@case
def module_attr_added():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        y = lin(x)
        return y * lin.scale_output if getattr(lin, "scale_output", None) is not None else y

    return f, _ones(2), lambda: setattr(lin, "scale_output", 3.0)


@case
def module_parameter_replaced():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    def mutate():
        lin.weight = torch.nn.Parameter(torch.full((2, 2), 5.0))

    return f, _ones(2), mutate


@case
def module_submodule_replaced():
    seq = torch.nn.Sequential(torch.nn.ReLU())

    def f(x):
        return seq(x - 0.5)

    return f, _ones(2), lambda: seq.__setitem__(0, torch.nn.Sigmoid())


@case
def module_list_grows():
    layers = torch.nn.ModuleList([torch.nn.Identity()])

    def f(x):
        for layer in layers:
            x = layer(x) + 1
        return x

    return f, _ones(2), lambda: layers.append(torch.nn.Identity())


@case
def module_dict_key_added():
    heads = torch.nn.ModuleDict({"a": torch.nn.Identity()})

    def f(x):
        return x + 1 if "b" in heads else x - 1

    return f, _ones(2), lambda: heads.__setitem__("b", torch.nn.Identity())


@case
def module_forward_replaced_on_instance():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    return f, _ones(2), lambda: setattr(lin, "forward", lambda v: v * 100)


@case
def module_buffer_replaced():
    bn = torch.nn.BatchNorm1d(2).eval()

    def f(x):
        return bn(x)

    def mutate():
        bn.running_mean = torch.full((2,), 3.0)

    return f, lambda: (torch.ones(3, 2),), mutate


@case
def module_plain_attr_changed():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.alpha = 2

        def forward(self, x):
            return x * self.alpha

    block = Block()

    def f(x):
        return block(x)

    return f, _ones(2), lambda: setattr(block, "alpha", 7)


@case
def module_forward_hook_added():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    return f, _ones(2), lambda: lin.register_forward_hook(lambda m, i, o: o * 10)


@case
def module_forward_pre_hook_added():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    return f, _ones(2), lambda: lin.register_forward_pre_hook(lambda m, i: (i[0] * 10,))


@case
def parameter_requires_grad_changed():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return x * 2 if lin.weight.requires_grad else x + 100

    return f, _ones(2), lambda: lin.weight.requires_grad_(False)


@case
def parameter_dtype_changed_in_place():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return x.to(lin.weight.dtype)

    return f, _ones(2), lambda: lin.double()


@case
def buffer_shape_changed_in_place():
    class Holder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.ones(2))

        def forward(self, x):
            return x + self.table.shape[0]

    holder = Holder()

    def f(x):
        return holder(x)

    def mutate():
        holder.table.data = torch.ones(5)

    return f, _ones(2), mutate


@case
def object_becomes_callable():
    class Plain:
        pass

    class Calls:
        def __call__(self):
            return 1

    holder = Holder(obj=Plain())

    def f(x):
        return x + 1 if callable(holder.obj) else x - 1

    return f, _ones(2), lambda: setattr(holder, "obj", Calls())


@case
def tensor_leaf_status_changed():
    state = {"leaf": True}

    def f(x):
        return x * 2 if x.is_leaf else x + 100

    def make():
        base = torch.ones(2, requires_grad=True)
        return (base if state["leaf"] else base * 1,)

    return f, make, lambda: state.update(leaf=False)


@case
def object_identity_compared():
    a = type("A", (), {})()
    holder = Holder(first=a, second=a)

    def f(x):
        return x + 1 if holder.first is holder.second else x - 1

    return f, _ones(2), lambda: setattr(holder, "second", type(a)())


@case
def module_bias_none_then_set():
    lin = torch.nn.Linear(2, 2, bias=False)

    def f(x):
        return x * 2 if lin.bias is None else x + 100

    return f, _ones(2), lambda: setattr(lin, "bias", torch.nn.Parameter(torch.zeros(2)))


@case
def module_submodule_none_then_set():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = None

        def forward(self, x):
            return x * 2 if self.norm is None else self.norm(x)

    block = Block()

    def f(x):
        return block(x)

    return f, _ones(2), lambda: setattr(block, "norm", torch.nn.Identity())


@case
def sequential_order_swapped():
    seq = torch.nn.Sequential(torch.nn.Tanh(), torch.nn.Sigmoid())

    def f(x):
        return seq(x - 0.5)

    def mutate():
        seq._modules = collections.OrderedDict([("1", seq[1]), ("0", seq[0])])

    return f, _ones(2), mutate


@case
def module_class_constant_changed():
    class Block(torch.nn.Module):
        SCALE = 2

        def forward(self, x):
            return x * type(self).SCALE

    block = Block()

    def f(x):
        return block(x)

    return f, _ones(2), lambda: setattr(Block, "SCALE", 9)


@case
def module_list_attribute_appended():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.offsets = [1]

        def forward(self, x):
            for o in self.offsets:
                x = x + o
            return x

    block = Block()

    def f(x):
        return block(x)

    return f, _ones(2), lambda: block.offsets.append(5)


@case
def base_forward_replaced_under_super():
    class Base(torch.nn.Module):
        def forward(self, x):
            return x * 2

    class Child(Base):
        def forward(self, x):
            return super().forward(x) + 1

    child = Child()

    def f(x):
        return child(x)

    return f, _ones(2), lambda: setattr(Base, "forward", lambda self, x: x * 7)


@case
def bound_method_rebound_to_other_instance():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k

    holder = Holder(fn=Scaler(2).apply)

    def f(x):
        return holder.fn(x)

    return f, _ones(2), lambda: setattr(holder, "fn", Scaler(5).apply)


@case
def object_class_reassigned():
    class A:
        def k(self):
            return 1

    class B:
        def k(self):
            return 2

    obj = A()

    def f(x):
        return x * obj.k()

    return f, _ones(2), lambda: setattr(obj, "__class__", B)


@case
def dict_key_order_changed():
    d = {"a": 3, "b": 5}

    def f(x):
        return x * d[next(iter(d))]

    def mutate():
        d["a"] = d.pop("a")  # the same items, "a" now last

    return f, _ones(2), mutate


@case
def nested_config_value_changed():
    cfg = {"layers": [{"dim": 2}, {"dim": 3}]}

    def f(x):
        return x * cfg["layers"][1]["dim"]

    return f, _ones(2), lambda: cfg["layers"][1].__setitem__("dim", 8)


@case
def float_argument_changed():
    state = {"f": 0.5}

    def f(x, k):
        return x * k

    return f, lambda: (torch.ones(2), state["f"]), lambda: state.update(f=1.5)


@case
def int_argument_branch():
    state = {"n": 2}

    def f(x, n):
        return x + 1 if n > 3 else x - 1

    return f, lambda: (torch.ones(2), state["n"]), lambda: state.update(n=5)


@case
def star_args_length_changed():
    state = {"extra": (1,)}

    def f(x, *rest):
        return x + len(rest)

    return f, lambda: (torch.ones(2), *state["extra"]), lambda: state.update(extra=(1, 2))


@case
def optional_tensor_argument_given():
    state = {"b": None}

    def f(x, b):
        return x * 2 if b is None else x + b + 10

    return f, lambda: (torch.ones(2), state["b"]), lambda: state.update(b=torch.ones(2))


@case
def tensor_list_argument_grows():
    state = {"n": 2}

    def f(xs):
        total = xs[0]
        for t in xs[1:]:
            total = total + t
        return total

    return f, lambda: ([torch.ones(2)] * state["n"],), lambda: state.update(n=3)


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


@case
def finfo_of_a_changed_dtype():
    state = {"dtype": torch.float32}

    def f(x):
        return x.masked_fill(x > 0, torch.finfo(x.dtype).min).double()

    return f, lambda: (torch.ones(2, dtype=state["dtype"]),), lambda: state.update(dtype=torch.float16)


@case
def module_made_in_forward_with_a_changed_setting():
    holder = Holder(slope=0.1)

    def f(x):
        return torch.nn.LeakyReLU(holder.slope)(x - 2)

    return f, _ones(2), lambda: setattr(holder, "slope", 0.5)


@case
def module_call_overridden_on_class():
    class Scaled(torch.nn.Module):
        def forward(self, x):
            return x + 1

    module = Scaled()

    def f(x):
        return module(x)

    def mutate():
        Scaled.__call__ = lambda self, x: torch.nn.Module.__call__(self, x) * 10

    return f, _ones(2), mutate


@case
def classmethod_reads_changed_class_state():
    class Counter:
        step = 1

        @classmethod
        def size(cls):
            return cls.step * 2

    def f(x):
        return x * Counter.size()

    return f, _ones(2), lambda: setattr(Counter, "step", 4)


@case
def staticmethod_replaced():
    class Ops:
        @staticmethod
        def k():
            return 2

    obj = Ops()

    def f(x):
        return x * obj.k()

    return f, _ones(2), lambda: setattr(Ops, "k", staticmethod(lambda: 9))


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


@case
def module_dict_items_iteration():
    heads = torch.nn.ModuleDict({"a": torch.nn.Identity()})

    def f(x):
        total = x
        for _, head in heads.items():
            total = total + head(x)
        return total

    return f, _ones(2), lambda: heads.__setitem__("b", torch.nn.Identity())


@case
def getattr_through_python_getattribute():
    class Proxy:
        def __init__(self):
            self.inner = 2

        def __getattribute__(self, name):
            if name == "value":
                return object.__getattribute__(self, "inner") * 10
            return object.__getattribute__(self, name)

    proxy = Proxy()

    def f(x):
        return x * proxy.value

    return f, _ones(2), lambda: setattr(proxy, "inner", 3)


@case
def parameter_attribute_added():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x) * (2 if hasattr(lin.weight, "_sharded") else 1)

    return f, _ones(2), lambda: setattr(lin.weight, "_sharded", True)


@case
def layer_norm_eps_changed():
    ln = torch.nn.LayerNorm(4)

    def f(x):
        return ln(x)

    return f, lambda: (torch.arange(8.0).reshape(2, 4),), lambda: setattr(ln, "eps", 10.0)


@case
def plain_list_of_modules_grows():
    class Stack(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = [torch.nn.Identity()]

        def forward(self, x):
            for layer in self.scales:
                x = layer(x) * 2
            return x

    stack = Stack()

    def f(x):
        return stack(x)

    return f, _ones(2), lambda: stack.scales.append(torch.nn.Identity())


@case
def tuple_argument_item_becomes_tensor():
    state = {"pair": (torch.ones(2), None)}

    def f(pair):
        a, b = pair
        return a * 2 if b is None else a + b + 10

    return f, lambda: (state["pair"],), lambda: state.update(pair=(torch.ones(2), torch.ones(2)))


# ----------------------------------------------------------------- global torch state


@case
def grad_mode_changed():
    def f(x):
        return x * 2 if torch.is_grad_enabled() else x + 100

    def mutate():
        torch.set_grad_enabled(False)

    return f, _ones(2), mutate


@case
def default_dtype_changed():
    def f(x):
        return x + torch.ones(2)

    def mutate():
        torch.set_default_dtype(torch.float64)

    return f, _ones(2), mutate


# ----------------------------------------------------------------- the harness


def _outcome(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        return "value", fn(*args)
    except Exception as exc:
        return "raised", (type(exc), str(exc))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.requires_grad == b.requires_grad
            and torch.allclose(a.detach(), b.detach(), equal_nan=True)
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


@pytest.fixture
def restore_state():
    """Global torch state and this module's globals as they were: cases change them."""
    grad, dtype = torch.is_grad_enabled(), torch.get_default_dtype()
    saved = {name: globals()[name] for name in ("G_SCALE", "G_FLAG", "G_NAME", "_g_helper")}
    yield
    for name in ("DYNAJIT_SOUNDNESS_FLAG", "DYNAJIT_SOUNDNESS_SCALE"):
        os.environ.pop(name, None)
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)
    globals().update(saved)


# Facts the runtime, not the trace, gets wrong (each an xfail until fixed there).
KNOWN_FAILURES: dict[str, str] = {}


def _params(names: list[str]) -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[name], strict=True))
        if name in KNOWN_FAILURES
        else name
        for name in names
    ]


def _check_case(name: str, dynamic: bool | None) -> None:
    capture.reset()
    program, make_args, mutate = CASES[name]()
    counter = CompileCounter()
    compiled = capture.optimize(counter, dynamic=dynamic)(program)
    before = _outcome(program, make_args())
    with capture.observe() as seen:
        got = _outcome(compiled, make_args())
    assert _same(got, before), f"before the change: compiled {got!r}, eager {before!r}"
    # The whole program was traced: a fact read by code that ran in Python instead would test nothing.
    breaks = [b.reason for frame in seen.frames for b in frame.graph_breaks]
    assert counter.frame_count >= 1 and not breaks, f"not traced whole: {breaks}"
    mutate()
    after = _outcome(program, make_args())
    assert not _same(after, before), "the change must change eager's answer, or the case tests nothing"
    got = _outcome(compiled, make_args())
    assert _same(got, after), f"after the change: compiled {got!r}, eager {after!r}"


@pytest.mark.parametrize("name", _params(sorted(CASES)))
def test_compiled_follows_eager_after_one_fact_changes(name, restore_state):
    _check_case(name, dynamic=None)


# Cases whose facts are sizes, ints and tensor metadata: again with every size and int symbolic.
DYNAMIC_CASES = sorted(
    name
    for name in CASES
    if name.startswith(("tensor_", "int_", "float_", "star_", "tuple_", "size_", "finfo", "optional_"))
)


@pytest.mark.parametrize("name", _params(DYNAMIC_CASES))
def test_dynamic_compiled_follows_eager_after_one_fact_changes(name, restore_state):
    _check_case(name, dynamic=True)


def test_the_corpus_is_large_enough():
    assert len(CASES) >= 40
