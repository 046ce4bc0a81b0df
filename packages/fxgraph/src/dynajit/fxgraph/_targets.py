"""What a node's target is: its readable name, and whether running it mutates state or draws random numbers.

Passes must never drop, merge or pre-compute a node whose effect the user
would see: an in-place op, an ``out=`` write, a print, a random draw (it
advances the generator), a module that updates its buffers while training.
These rules are tables, extended by adding names.
"""

from __future__ import annotations

import builtins
import operator
from typing import Any

import torch
import torch.fx

from dynajit.fxgraph._inplace import AUGMENTED_OPERATORS, passes_inplace

__all__ = ["has_side_effects", "is_random", "mutates", "target_name"]

#: Callables (by identity) that act on the world outside their result.
SIDE_EFFECT_FUNCTIONS: frozenset[Any] = AUGMENTED_OPERATORS | {
    builtins.print,
    builtins.setattr,
    builtins.delattr,
    operator.delitem,
    operator.imatmul,
    torch.manual_seed,
    torch.seed,
    torch.set_grad_enabled,
    torch._assert,
    torch.autograd.backward,
}

#: Function and method names (without module) that draw from a random generator.
RANDOM_NAMES: frozenset[str] = frozenset(
    {
        "rand",
        "randn",
        "randint",
        "randperm",
        "rand_like",
        "randn_like",
        "randint_like",
        "bernoulli",
        "multinomial",
        "normal",
        "poisson",
        "dropout",
        "dropout1d",
        "dropout2d",
        "dropout3d",
        "alpha_dropout",
        "feature_alpha_dropout",
        "native_dropout",
        "rrelu",
        "gumbel_softmax",
        "fractional_max_pool2d",
        "fractional_max_pool3d",
    }
)

#: Methods that mutate their receiver without ending in an underscore.
MUTATING_METHODS: frozenset[str] = frozenset(
    {"__setitem__", "__delitem__", "backward", "requires_grad_", "retain_grad"}
)

#: Module types whose forward draws random numbers while training.
RANDOM_MODULES: tuple[type, ...] = (torch.nn.modules.dropout._DropoutNd, torch.nn.RReLU)


def target_name(target: Any) -> str:
    """A short, stable name for a node target: ``torch.relu``, ``operator.getitem``, ``aten.add.Tensor``, ``relu``."""
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return str(target)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None)
    if name is None:
        return repr(target)
    owner, _, short = name.rpartition(".")
    if owner in _OWNER_NAMES:
        return f"{_OWNER_NAMES[owner]}.{short}"
    module = getattr(target, "__module__", None)
    if module in (None, "builtins"):
        return name
    return f"{_MODULE_NAMES.get(module, module)}.{name}"


# Where torch's C-implemented callables claim to live, and where users call them from.
_OWNER_NAMES = {"_VariableFunctionsClass": "torch", "TensorBase": "torch.Tensor", "_TensorBase": "torch.Tensor"}
_MODULE_NAMES = {"_operator": "operator", "torch._C._nn": "torch.nn.functional", "torch._C._fft": "torch.fft"}


def _short_name(target: Any) -> str:
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name.split("::")[-1]
    if isinstance(target, torch._ops.OpOverloadPacket):
        return target.__name__
    return getattr(target, "__name__", "")


# The augmented assignments called by their method names (``x.__iadd__(y)``): in place, though dunders.
_INPLACE_DUNDERS = frozenset(f"__{op.__name__}__" for op in (*AUGMENTED_OPERATORS, operator.imatmul))


def _is_inplace_name(name: str) -> bool:
    return (name.endswith("_") and not name.endswith("__") and name != "_") or name in _INPLACE_DUNDERS


def _op_overload_effects(target: Any) -> tuple[bool, bool]:
    """(mutates, random) for an aten operator, read from its schema and tags."""
    overloads = (
        [target] if isinstance(target, torch._ops.OpOverload) else [getattr(target, o) for o in target.overloads()]
    )
    mutates = any(op._schema.is_mutable for op in overloads)
    random = any(torch.Tag.nondeterministic_seeded in op.tags for op in overloads)
    return mutates, random


def _module_of(node: torch.fx.Node) -> torch.nn.Module | None:
    owner = node.graph.owning_module
    return owner.get_submodule(node.target) if owner is not None else None  # type: ignore[arg-type]


def is_random(node: torch.fx.Node) -> bool:
    """True when running ``node`` draws from a random-number generator."""
    if node.op in ("call_function", "call_method"):
        if isinstance(node.target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
            return _op_overload_effects(node.target)[1]
        name = _short_name(node.target)
        return name in RANDOM_NAMES or name.rstrip("_") in RANDOM_NAMES or name in ("uniform_", "normal_", "random_")
    if node.op == "call_module":
        module = _module_of(node)
        return module is not None and any(isinstance(sub, RANDOM_MODULES) and sub.training for sub in module.modules())
    return False


def mutates(node: torch.fx.Node) -> bool:
    """True when ``node`` writes to a tensor or to Python state."""
    if node.op in ("placeholder", "output"):
        return True
    if node.kwargs.get("out") is not None or passes_inplace(node.target, node.args, node.kwargs):
        return True
    if node.op == "call_function":
        if isinstance(node.target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
            return _op_overload_effects(node.target)[0] or node.is_impure(impure_random=False)
        return (
            node.target in SIDE_EFFECT_FUNCTIONS
            or _is_inplace_name(_short_name(node.target))
            or node.is_impure(impure_random=False)
        )
    if node.op == "call_method":
        return node.target in MUTATING_METHODS or _is_inplace_name(str(node.target))
    if node.op == "call_module":
        module = _module_of(node)
        if module is None:
            return True
        if getattr(module, "_is_impure", False):
            return True
        # A training module may update its buffers (BatchNorm's running statistics).
        return any(sub.training and any(True for _ in sub.buffers(recurse=False)) for sub in module.modules())
    return False


def has_side_effects(node: torch.fx.Node) -> bool:
    """True when removing, merging or pre-computing ``node`` would change what the user observes."""
    return mutates(node) or is_random(node)
