"""Turn a real Python value read from the frame into a variable tracker, recording the guards it relies on."""

from __future__ import annotations

import collections
import enum
import functools
import inspect
import os
import types
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic import marks as _marks
from dynajit.capture._symbolic.paths import Attr, Item, Local, Path, reads_hooked
from dynajit.capture._symbolic.variables import (
    VT,
    BuiltinVar,
    ClassVar,
    ConstVar,
    DictVar,
    ListVar,
    NNModuleVar,
    ObjectVar,
    PyModuleVar,
    SizeVar,
    TorchFunctionVar,
    TupleVar,
    UserFunctionVar,
    UserObjectVar,
    unsupported,
)
from dynajit.capture._symbolic.variables.autograd_function import is_function_apply, wrap_autograd_function_apply
from dynajit.capture._symbolic.variables.collections_ import DefaultDictVar, DequeVar
from dynajit.capture._symbolic.variables.constant import CONSTANT_TYPES, GUARDED_SCALARS, constant_key
from dynajit.capture._symbolic.variables.container_iterators import WatchedIteration, wrap_watched_iteration
from dynajit.capture._symbolic.variables.containers import NamedTupleVar, is_named_tuple_class
from dynajit.capture._symbolic.variables.context_vars import wrap_context_var_object
from dynajit.capture._symbolic.variables.contexts import (
    AUTOCAST_SETTING_ATTRS,
    AUTOCAST_TYPES,
    CONTEXT_MANAGER_CALLS,
    AutocastVar,
    autocast_settings,
)
from dynajit.capture._symbolic.variables.ndarrays import wrap_numpy_value
from dynajit.capture._symbolic.variables.objects import EnvironVar, WeakRefVar
from dynajit.capture._symbolic.variables.tensor import TensorMethodVar, TensorVar, is_graphable_torch_function

if TYPE_CHECKING:
    from dynajit.capture._symbolic.output import OutputGraph

__all__ = ["wrap_value"]


def wrap_value(output: OutputGraph, value: Any, path: Path | None) -> VT:
    """The tracker for ``value`` (reached by ``path``, None when it is not reachable from the frame).

    A mutable object gets one tracker per trace, however it is reached, so a
    mutation made through one name is seen through every other.
    """
    # Tensors are not cached here: the output keeps one graph input per tensor object and guards each
    # further path that reaches it as an alias of the first.
    if reads_hooked(type(value)):
        # isinstance and hasattr would ask the object through its class's own __getattribute__ (for __class__
        # at every failed check): a visible effect of compiling. What it is is decided by its type alone.
        return _tracked(output, value, path, _wrap_hooked)
    if isinstance(value, (list, dict, collections.deque)) or (
        hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, torch.Tensor))
    ):
        return _tracked(output, value, path, _wrap)
    return _wrap(output, value, path)


def _tracked(output: OutputGraph, value: Any, path: Path | None, wrap: Callable[..., VT]) -> VT:
    """The one tracker of a mutable object in this trace, made by ``wrap`` the first time it is reached."""
    known = output.wrapped.get(id(value))
    if known is not None:
        tracker = known[1]
        if path is not None and tracker.source is not None and path != tracker.source:
            # The same object reached by another path: the trace relies on both paths reaching one object
            # (reads through either go to the one tracker), which its type guard alone does not say. An
            # aliasing guard says exactly that; identity guards would recompile for every new object.
            output.aliases.append((tracker.source, path))
        return tracker
    made = wrap(output, value, path)
    output.wrapped[id(value)] = (value, made)
    return made


def _wrap_hooked(output: OutputGraph, value: Any, path: Path | None) -> VT:
    """An object whose class reads attributes with a Python ``__getattribute__``: its reads are traced (the hook
    inlined). A tensor or a module of such a class is not traced: their reads (a tensor's metadata, a module's
    parameters and hooks) would run the hook while compiling and in the guards of every call."""
    cls = type(value)
    output.guard("type_match", path, value)
    for kind in (torch.Tensor, torch.nn.Module):
        if issubclass(cls, kind):
            unsupported(
                f"a {cls.__qualname__}, a {kind.__qualname__} subclass with a Python __getattribute__, is not traced"
            )
    return UserObjectVar(value, path)


# nn.Parameter's: a parameter's ops give plain tensors and run no Python code.
_NO_TORCH_FUNCTION = torch._C._disabled_torch_function_impl


def _wrap(output: OutputGraph, value: Any, path: Path | None) -> VT:
    from dynajit.capture._symbolic import marks

    if type(value) is WatchedIteration:  # a loop's iterator handed to a resume function
        return wrap_watched_iteration(output, value, path)
    context_var = wrap_context_var_object(output, value, path)  # ContextVars, their methods, tokens
    if context_var is not None:
        return context_var
    numpy_value = wrap_numpy_value(output, value, path)  # ndarrays, NumPy scalars and functions
    if numpy_value is not None:
        return numpy_value

    if isinstance(value, torch.Tensor):
        if type(value) is not torch.Tensor and type(value).__torch_function__ is not _NO_TORCH_FUNCTION:
            # Checked on the type alone: any metadata read would already run the subclass's Python code.
            output.guard("type_match", path, value)
            unsupported(
                f"a {type(value).__qualname__}, a tensor subclass whose __torch_function__ runs on every op, is not "
                "traced (its results are of the subclass, and its code may change what an op does)"
            )
        if value.is_nested and value.layout == torch.strided:
            output.guard("equals_match", _attr(path, "is_nested"), True)
            unsupported("a nested tensor of the strided layout has no size to trace with: the frame runs in Python")
        # Fake tensors have no sparse storage or quantizer: the frame runs in Python.
        if value.layout != torch.strided:
            output.guard("equals_match", _attr(path, "layout"), value.layout)
            unsupported(f"a tensor of layout {value.layout} is not traced: the frame runs in Python")
        if value.is_quantized:
            output.guard("equals_match", _attr(path, "is_quantized"), True)
            unsupported(f"a quantized tensor ({value.dtype}) is not traced: the frame runs in Python")
        if isinstance(value, torch.nn.Parameter) and path is not None and _from_module(path):
            return module_tensor(output, value, path)
        return output.input_tensor(value, path)
    if output.shapes.wants_symbolic_int(value, path) and not _module_attribute(output, path):
        return output.input_int(value, path)  # type: ignore[arg-type]
    if isinstance(value, GUARDED_SCALARS):
        output.guard("constant_match", path, value)
        return ConstVar(value, path)
    if isinstance(value, CONSTANT_TYPES) and not isinstance(value, tuple):
        output.guard("equals_match", path, value)
        return ConstVar(value, path)
    if isinstance(value, (tuple, list)) and type(value) in (tuple, list, torch.Size):
        output.guard("type_match", path, value)
        output.guard("length_check", path, value)
        elements = [wrap_value(output, v, Item(path, i) if path is not None else None) for i, v in enumerate(value)]
        if type(value) is torch.Size:
            return SizeVar(elements, path)
        return TupleVar(elements, path) if isinstance(value, tuple) else ListVar(elements, path)
    if isinstance(value, tuple) and is_named_tuple_class(type(value)):
        output.guard("type_match", path, value)
        output.guard("length_check", path, value)
        elements = [wrap_value(output, v, Item(path, i) if path is not None else None) for i, v in enumerate(value)]
        return NamedTupleVar(elements, type(value), path)
    if type(value) is collections.deque:
        output.guard("type_match", path, value)
        output.guard("length_check", path, value)
        maxlen = wrap_value(output, value.maxlen, _attr(path, "maxlen")).const()
        elements = [wrap_value(output, v, Item(path, i) if path is not None else None) for i, v in enumerate(value)]
        return DequeVar(elements, maxlen, path)
    if type(value) is collections.defaultdict and all(constant_key(k) for k in value):
        output.guard("type_match", path, value)
        output.guard("dict_keys", path, value)
        factory = wrap_value(output, value.default_factory, _attr(path, "default_factory"))
        items = {k: wrap_value(output, v, Item(path, k) if path is not None else None) for k, v in value.items()}
        return DefaultDictVar(factory, items, path)
    if type(value) in (dict, collections.OrderedDict) and all(constant_key(k) for k in value):
        output.guard("type_match", path, value)
        output.guard("dict_keys", path, value)
        items = {k: wrap_value(output, v, Item(path, k) if path is not None else None) for k, v in value.items()}
        return DictVar(items, path, type(value))
    if isinstance(value, torch.nn.Module):
        if path is not None and _is_plain_container(value):
            # It holds nothing but its submodules and is often made per call (a slice of another one, handed to
            # a resume function): guard its shape, not its identity; each submodule used is guarded through it.
            output.guard("type_match", path, value)
            output.guard("dict_keys", _attr(path, "_modules"), value._modules)
            output.guard("constant_match", _attr(path, "training"), value.training)
        else:
            output.guard("nn_module", path, value)
        return NNModuleVar(value, path)
    if type(value) is functools.partial and path is not None:
        from dynajit.capture._symbolic.variables.functions import PartialVar

        output.guard("type_match", path, value)
        func = wrap_value(output, value.func, _attr(path, "func"))
        args = wrap_value(output, value.args, _attr(path, "args")).unpack(None)  # type: ignore[arg-type]
        keywords = wrap_value(output, value.keywords, _attr(path, "keywords"))
        return PartialVar(func, args, dict(keywords.items), path)  # type: ignore[attr-defined]
    if value is os.environ:
        output.guard("id_match", path, value)
        return EnvironVar(value, path)
    if isinstance(value, enum.Enum):
        # A member is a singleton constant: which one it is decides comparisons, so guard it by identity.
        output.guard("id_match", path, value)
        return ConstVar(value, path)
    if isinstance(value, weakref.ReferenceType):
        output.guard("id_match", path, value)
        return WeakRefVar(value, path)
    if isinstance(value, types.ModuleType):
        output.guard("id_match", path, value)
        return PyModuleVar(value, path)
    if marks.is_compile_query(value):
        return BuiltinVar(value, path)
    if type(value) in AUTOCAST_TYPES:
        # Its settings, not its identity: an autocast object may be made per call (handed to a resume function).
        output.guard("type_match", path, value)
        for name, setting in zip(AUTOCAST_SETTING_ATTRS, autocast_settings(value)):
            wrap_value(output, setting, _attr(path, name))
        return AutocastVar(autocast_settings(value), path)
    if isinstance(value, types.FunctionType) and value in CONTEXT_MANAGER_CALLS:
        output.guard("function_match", path, value)
        return TorchFunctionVar(value, path)
    tensor_method = _tensor_method(output, value, path)
    if tensor_method is not None:
        return tensor_method
    if is_graphable_torch_function(value) and not isinstance(value, types.MethodType):
        output.guard("function_match", path, value)
        return TorchFunctionVar(value, path)
    if isinstance(value, types.FunctionType) and path is not None and _made_per_call(value, path):
        return _by_code(output, value, path)
    if isinstance(value, types.FunctionType):
        output.guard("function_match", path, value)
        compiled = value.__dict__.get("_dynajit_compiled")
        if compiled is not None:  # a compiled wrapper: trace the function it wraps
            return UserFunctionVar(compiled.fn, _attr(_attr(path, "_dynajit_compiled"), "fn"))
        return UserFunctionVar(value, path)
    if isinstance(value, types.WrapperDescriptorType) and _has_builtin_handler(value):
        output.guard("id_match", path, value)
        return BuiltinVar(value, path)
    if is_function_apply(value):
        return wrap_autograd_function_apply(output, value, path)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(value, "__self__", None)
        if path is not None and owner is not None and not isinstance(owner, types.ModuleType):
            # A bound method of a C type (`ctx_var.reset`) is a new object at every attribute read:
            # guard the object it is bound to and its name, not its identity.
            output.guard("type_match", path, value)
            output.guard("id_match", _attr(path, "__self__"), owner)
            output.guard("equals_match", _attr(path, "__name__"), value.__name__)
            return BuiltinVar(value, path)
        output.guard("id_match", path, value)
        return BuiltinVar(value, path)
    if isinstance(value, type):
        output.guard("id_match", path, value)
        return ClassVar(value, path)
    if isinstance(value, types.MethodType):
        from dynajit.capture._symbolic.variables import BoundMethodVar

        self_vt = wrap_value(output, value.__self__, _attr(path, "__self__"))
        func_vt = wrap_value(output, value.__func__, _attr(path, "__func__"))
        return BoundMethodVar(func_vt, self_vt, path)
    if isinstance(value, types.MethodDescriptorType) and value.__objclass__ in _CONTAINER_CLASSES:
        from dynajit.capture._symbolic.variables.functions import UnboundMethodVar

        output.guard("id_match", path, value)
        return UnboundMethodVar(value, path)
    if callable(value) and not hasattr(value, "__dict__"):
        output.guard("id_match", path, value)
        return ObjectVar(value, path)
    output.guard("type_match", path, value)
    return UserObjectVar(value, path)


def _tensor_method(output: OutputGraph, value: Any, path: Path | None) -> VT | None:
    """``x.view`` handed over as an object (on the stack across a graph break, ``x.view(shape())`` with a break in
    ``shape``): the method of the tensor reached as ``value.__self__``, traced as ``x.view`` is; None for any
    other value. Guarded by its name, not its identity (a bound method is a new object at every read)."""
    owner = getattr(value, "__self__", None) if isinstance(value, _C_METHOD_TYPES) else None
    if path is None or not isinstance(owner, torch.Tensor):
        return None
    name = value.__name__
    if inspect.getattr_static(type(owner), name, None) is not inspect.getattr_static(torch.Tensor, name, None):
        return None  # a subclass's own C method: not Tensor's
    output.guard("type_match", path, value)
    output.guard("equals_match", _attr(path, "__name__"), name)
    tensor = wrap_value(output, owner, _attr(path, "__self__"))
    if not isinstance(tensor, TensorVar):
        unsupported(f"Tensor.{name} of a tensor traced as {type(tensor).__name__}")
    return TensorMethodVar(tensor, name)


_C_METHOD_TYPES = (types.BuiltinMethodType, types.MethodWrapperType)
_CONTAINER_CLASSES = (list, dict, set, tuple, frozenset)


def module_tensor(output: OutputGraph, value: torch.Tensor, path: Path) -> VT:
    """A module's parameter or buffer: a get_attr node, remembering the real tensor.

    Its identity and layout (LAYOUT_MATCH) are guarded; the rest of its metadata, which can change in place,
    is guarded when Python code reads it (``TensorVar.metadata``).
    """
    tracker = output.module_tensor(value, path)
    tracker.module_tensor = value
    return tracker


def _made_per_call(fn: types.FunctionType, path: Path) -> bool:
    """A nested function handed to the frame as an argument (a closure live across a graph break, passed to
    the resume function): made anew by every call, so guarding its identity would compile again at every call
    (its entry dies with it). Such a function without attributes or marks is guarded by what it is made of."""
    return (
        isinstance(path, Local)
        and type(fn) is types.FunctionType
        and (fn.__closure__ is not None or "<locals>" in fn.__qualname__)
        and not fn.__dict__
        and not _marks.is_marked(fn)
    )


def _by_code(output: OutputGraph, fn: types.FunctionType, path: Path) -> VT:
    """Guards of what a function made by a ``def`` is: its type, code and globals, its defaults' shape (their
    values are guarded where read), no attributes, and its cells (their contents guarded where read, their
    identity relations by ``guarding``); its own identity only where the trace reads it (``const()``)."""
    output.guard("type_match", path, fn)
    output.guard("id_match", Attr(path, "__code__"), fn.__code__)
    output.guard("id_match", Attr(path, "__globals__"), fn.__globals__)
    output.guard("dict_keys", Attr(path, "__dict__"), fn.__dict__)
    if fn.__defaults__ is None:
        output.guard("constant_match", Attr(path, "__defaults__"), None)
    else:
        output.guard("length_check", Attr(path, "__defaults__"), fn.__defaults__)
    if fn.__kwdefaults__ is None:
        output.guard("constant_match", Attr(path, "__kwdefaults__"), None)
    else:
        output.guard("dict_keys", Attr(path, "__kwdefaults__"), fn.__kwdefaults__)
    made = UserFunctionVar(fn, path, identity_unguarded=output)
    for i, cell in enumerate(fn.__closure__ or ()):
        output.cell_paths.append((cell, Item(Attr(path, "__closure__"), i), made))
    return made


def _has_builtin_handler(value: Any) -> bool:
    from dynajit.capture._symbolic.builtins_table import BUILTINS

    return value in BUILTINS


def _attr(path: Path | None, name: str) -> Path | None:
    from dynajit.capture._symbolic.paths import Attr

    return Attr(path, name) if path is not None else None


_CONTAINERS = (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)


def _is_plain_container(module: torch.nn.Module) -> bool:
    """A ModuleList, Sequential or ModuleDict with no tensors or hooks of its own."""
    return (
        type(module) in _CONTAINERS
        and not module._parameters
        and not module._buffers
        and not (module._forward_hooks or module._forward_pre_hooks or module._backward_hooks)
    )


def _module_attribute(output: OutputGraph, path: Path | None) -> bool:
    """Whether ``path`` reads an attribute of an nn.Module (a layer's ``head_dim``): its ints stay constants, as
    TorchDynamo keeps them, though another model of the same code read another value there."""
    from dynajit.capture._symbolic.paths import Attr

    if not isinstance(path, Attr):
        return False
    return any(
        tracker.source == path.base and isinstance(owner, torch.nn.Module) for owner, tracker in output.wrapped.values()
    )


def _from_module(path: Path) -> bool:
    from dynajit.capture._symbolic.paths import Attr

    return isinstance(path, Attr)
