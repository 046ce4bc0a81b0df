"""Calls of ``torch.autograd.Function`` subclasses: one graph node calling the Function's own ``apply``.

The node runs the real Function, so its backward is the user's: eager-style
backends call it as it is, and AOT autograd traces its forward on the graph's
inputs and its backward when it differentiates the forward graph, so gradients
are the Function's own. The example value comes from running ``apply`` once on
the fake inputs while tracing. The class, its ``apply``, ``forward``,
``backward`` and ``setup_context`` are guarded by identity, and the globals
their bodies read by :mod:`.autograd_function_bodies`, which makes a Function
whose methods could have an effect Python sees a graph break.
"""

from __future__ import annotations

import inspect
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.variables.autograd_function_bodies import guard_function_bodies, overrides
from dynajit.capture._symbolic.variables.base import VT, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.containers import TupleVar
from dynajit.capture._symbolic.variables.symbolic import SymIntVar
from dynajit.capture._symbolic.variables.tensor import TensorVar

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["AutogradFunctionApplyVar", "is_function_apply", "wrap_autograd_function_apply"]

_APPLY = inspect.getattr_static(torch.autograd.Function, "apply")  # a C classmethod
# The methods that make up the Function's behaviour: reassigning one on the class must recompile.
_GUARDED_METHODS = ("forward", "backward", "vjp", "setup_context")


def is_function_apply(value: Any) -> bool:
    """True for ``SomeFunction.apply`` of a ``torch.autograd.Function`` subclass (bound to the class)."""
    # A C method in recent torch; a Python classmethod in older releases (torch 2.13): bound either way.
    if not isinstance(value, (types.BuiltinMethodType, types.MethodType)):
        return False
    owner = value.__self__
    return (
        isinstance(owner, type)
        and issubclass(owner, torch.autograd.Function)
        and getattr(value, "__name__", None) == "apply"
        and inspect.getattr_static(owner, "apply") is _APPLY
    )


def wrap_autograd_function_apply(output: OutputGraph, value: Any, path: Path | None) -> VT:
    """The tracker of ``Cls.apply`` (``is_function_apply(value)``), guarded when read from the frame."""
    from dynajit.capture._symbolic.paths import Attr
    from dynajit.capture._symbolic.wrap import wrap_value

    cls = value.__self__
    if path is not None:
        # A bound C method is a new object at every read: its type, the class and its name are what count.
        output.guard("type_match", path, value)
        cls_path = Attr(path, "__self__")
        wrap_value(output, cls, cls_path)  # ID_MATCH on the class
        output.guard("equals_match", Attr(path, "__name__"), "apply")
        # Each read of ``Cls.apply`` binds a new method object (C or Python, by torch version), so identity would
        # fail at every call (or, held weakly, die at once): equal bound methods have the same function and class.
        output.guard("equals_match", Attr(cls_path, "apply"), value)
        for name in _GUARDED_METHODS:
            method = getattr(cls, name, None)
            if isinstance(method, types.FunctionType):
                output.guard("function_match", Attr(cls_path, name), method)
    return AutogradFunctionApplyVar(value, path)


class AutogradFunctionApplyVar(VT):
    """``Cls.apply`` of an autograd Function: a call is a graph node running the Function for real."""

    def __init__(self, apply: Any, source: Path | None = None) -> None:
        self.apply = apply
        self.source = source

    def python_type(self) -> type:
        return types.MethodType

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.paths import Attr

        cls = self.apply.__self__
        if getattr(cls, "generate_vmap_rule", False) or overrides(cls, "vmap") or overrides(cls, "jvp"):
            unsupported(f"autograd Function {cls.__qualname__} defines vmap or jvp rules, which are not traced")
        for arg in [*args, *kwargs.values()]:
            if not _immutable(arg):
                unsupported(f"autograd Function {cls.__qualname__} called with {arg}, which its methods could change")
        guard_function_bodies(tx.output, cls, None if self.source is None else Attr(self.source, "__self__"))
        return tx.output.call_function(_graph_target(cls), args, kwargs)

    def reconstruct(self, cg: CodeGen) -> None:
        self.reconstruct_object(cg, self.apply)

    def __repr__(self) -> str:
        return f"AutogradFunctionApplyVar({self.apply.__self__.__qualname__})"


# One graph target per Function class: a Python function FX code can hold as a global (a bound C method has no
# module FX could name it by).
_TARGETS: weakref.WeakKeyDictionary[type, Callable[..., Any]] = weakref.WeakKeyDictionary()


def _graph_target(cls: type) -> Callable[..., Any]:
    target = _TARGETS.get(cls)
    if target is None:
        ref = weakref.ref(cls)  # the table must not keep the class alive

        def apply(*args: Any, **kwargs: Any) -> Any:
            return ref().apply(*args, **kwargs)  # type: ignore[union-attr]

        apply.__name__ = f"{cls.__name__}_apply"
        apply.__qualname__ = f"{cls.__qualname__}.apply"
        target = _TARGETS[cls] = apply
    return target


def _immutable(value: VT) -> bool:
    """A tensor, a symbolic or constant number, or a tuple of them: what a Function's methods cannot change."""
    if isinstance(value, TupleVar):
        return all(_immutable(item) for item in value.items)
    return isinstance(value, (TensorVar, SymIntVar, ConstVar))
