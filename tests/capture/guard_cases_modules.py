"""Guard-soundness cases (registered in guard_cases.CASES): torch.nn modules.

The training flag, attributes, parameters, buffers, submodules, containers of modules, hooks, and forward or
__call__ replaced on an instance or class.
"""

from __future__ import annotations

import collections

import torch
from guard_cases import Holder, _ones, case


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


class _OwnForward(torch.nn.Module):
    """``self.forward = self.forward_split`` in __init__ (timm's FasterNet): the instance's forward runs."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.forward = self.forward_split

    def forward_split(self, x):
        return self.lin(x) + 1

    def forward_scaled(self, x):
        return self.lin(x) * 3


@case
def module_own_forward_rebound():
    m = _OwnForward()

    def f(x):
        return m(x)

    return f, _ones(2), lambda: setattr(m, "forward", m.forward_scaled)


@case
def module_own_forward_removed():
    m = _OwnForward()

    def f(x):
        return m(x)

    return f, _ones(2), lambda: delattr(m, "forward")  # then Module's own forward raises NotImplementedError


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
def global_module_forward_hook_registered():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    # (restore_state removes it again)
    return f, _ones(2), lambda: torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: o * 10)


@case
def parameter_data_swapped_for_another_shape():
    lin = torch.nn.Linear(2, 2)

    def f(x):
        return lin(x)

    def swap():
        lin.weight.data = torch.ones(3, 2)
        lin.bias.data = torch.zeros(3)

    return f, _ones(2), swap


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
def module_dict_items_iteration():
    heads = torch.nn.ModuleDict({"a": torch.nn.Identity()})

    def f(x):
        total = x
        for _, head in heads.items():
            total = total + head(x)
        return total

    return f, _ones(2), lambda: heads.__setitem__("b", torch.nn.Identity())


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


def _walked_sum(model, walk):
    def f(x):
        total = x
        for item in walk(model):
            total = total + (item[1].sum() if isinstance(item, tuple) else item.sum())
        return total

    return f


@case
def module_parameters_walk_sees_a_registered_parameter():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))

    def mutate():
        model[0].register_parameter("extra", torch.nn.Parameter(torch.full((1,), 100.0)))

    return _walked_sum(model, lambda m: m.named_parameters()), _ones(2), mutate


@case
def module_parameters_walk_sees_an_added_submodule():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    return _walked_sum(model, lambda m: m.parameters()), _ones(2), lambda: model.append(torch.nn.Linear(2, 1))


@case
def module_parameters_walk_sees_a_parameter_set_to_none():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    return _walked_sum(model, lambda m: m.parameters()), _ones(2), lambda: setattr(model[0], "bias", None)


@case
def module_parameters_walk_sees_a_shared_parameter_unshared():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    model[1].weight = model[0].weight  # shared: yielded once

    def mutate():
        model[1].weight = torch.nn.Parameter(torch.full((2, 2), 100.0))

    return _walked_sum(model, lambda m: m.parameters()), _ones(2), mutate


@case
def module_buffers_walk_sees_a_registered_buffer():
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(2))
    model.eval()
    return (
        _walked_sum(model, lambda m: [b.float() for b in m.buffers()]),
        _ones(2),
        lambda: model[0].register_buffer("extra", torch.full((1,), 100.0)),
    )


@case
def module_modules_walk_sees_an_added_submodule():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))

    def f(x):
        return x * len(list(model.modules()))

    return f, _ones(2), lambda: model[0].add_module("inner", torch.nn.ReLU())


@case
def module_tied_weights_untied():
    embedding, head = torch.nn.Embedding(3, 2), torch.nn.Linear(2, 3, bias=False)
    head.weight = embedding.weight  # tied, as language models tie their input and output embeddings

    def f(x):
        return head(embedding(torch.tensor([0, 2])) + x)

    def mutate():
        head.weight = torch.nn.Parameter(torch.full((3, 2), 5.0))

    return f, _ones(2), mutate
