"""nn.Modules reached from the frame: calls inlined through ``forward``, containers indexed, sliced and walked.

Parameters and buffers reach the graph as ``get_attr`` nodes bound to the real tensors (so in-place updates
are seen); each one read is guarded by identity, and the module by NN_MODULE, so a replaced parameter
recompiles. A module with hooks, or under global module hooks, is a graph break.
"""

from __future__ import annotations

import functools
import inspect
import types
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic import marks
from dynajit.capture._symbolic.guarding import SOURCELESS
from dynajit.capture._symbolic.paths import Attr, Item
from dynajit.capture._symbolic.variables.base import VT, raises_in_python, unsupported
from dynajit.capture._symbolic.variables.constant import ConstVar
from dynajit.capture._symbolic.variables.functions import UserFunctionVar
from dynajit.capture._symbolic.variables.objects import UserObjectVar, _attr_path

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["ModuleSliceVar", "NNModuleVar"]


class NNModuleVar(UserObjectVar):
    """An nn.Module: calling it inlines ``forward``; parameters and buffers become get_attr nodes.

    ``rebuild`` is ``(cls, args, kwargs)`` for a module made while tracing (``nn.ReLU()``), which is made
    again by that call when it escapes.
    """

    def __init__(self, value: Any, source: Any = None, rebuild: tuple[type, list[Any], dict[str, Any]] | None = None):
        super().__init__(value, source)
        self.rebuild = rebuild

    def reconstruct(self, cg: CodeGen) -> None:
        if self.source is not None or self.rebuild is None:
            super().reconstruct(cg)
            return
        cls, args, kwargs = self.rebuild
        cg.build_cached(self, lambda: cg.call_helper(functools.partial(cls, *args, **kwargs), lambda: 0))

    def getattr(self, tx: Tracer, name: str) -> VT:
        found = self.pending(tx, name)
        if found is not None:
            return found
        module = self.value
        path = _attr_path(self, name)
        if name in module._parameters or name in module._buffers:
            tensor = module._parameters.get(name, module._buffers.get(name))
            if tensor is None:
                return tx.wrap(None, path)  # guarded: a parameter set later must not be missed
            from dynajit.capture._symbolic.wrap import module_tensor

            return module_tensor(tx.output, tensor, path)
        if name in module._modules:
            sub = module._modules[name]
            return tx.wrap(sub, path)
        if name == "training":
            return tx.wrap(module.training, path)
        if name in _MODULE_ITERATORS and getattr(type(module), name) is getattr(torch.nn.Module, name):
            return _ModuleIterator(self, name)
        return self._read(tx, name)

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        """``module(...)``: its class's ``__call__``, which is nn.Module's (hooks, then forward) unless overridden."""
        if marks.is_disabled(self.value):  # the instance, or its class's forward, marked disable()
            unsupported(f"{type(self.value).__qualname__} is marked disable(): the module's call runs in Python")
        call = inspect.getattr_static(type(self.value), "__call__")
        class_path = _attr_path(self, "__class__")
        if call is not torch.nn.Module.__call__:
            if not isinstance(call, types.FunctionType):
                unsupported(f"{type(self.value).__name__}.__call__ is not a Python function")
            bound = self._class_member(tx, "__call__", call)
            assert bound is not None  # a Python function always binds
            return bound.call(tx, args, kwargs)
        tx.output.guard("function_match", class_path and Attr(class_path, "__call__"), call)
        return self.call_impl(tx, args, kwargs)

    def call_impl(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        """What ``nn.Module.__call__`` does: the module's forward hooks (nn.Module's own ``_call_impl`` traced), then
        its forward; backward hooks and global hooks leave the call to Python."""
        module = self.value
        if isinstance(module, torch.jit.ScriptModule):
            # (its class's ``forward`` is a descriptor that raises when read from the class)
            unsupported(f"{type(module).__name__} is a TorchScript module, which runs as it is")
        if isinstance(module, torch.nn.RNNBase):
            # Their fused kernels leave outputs undefined that AOT autograd must save for backward,
            # and they are one aten call each anyway: run them as Python, as torch.compile does.
            unsupported(f"{type(module).__name__} modules run eagerly (a fused recurrent kernel per call)")
        if any(_global_hooks()):
            unsupported("global nn.Module hooks are not traced")
        hooks = {name: getattr(module, name, None) for name in _MODULE_HOOKS}
        if hooks["_backward_hooks"] or hooks["_backward_pre_hooks"]:
            unsupported(f"{type(module).__name__} has backward hooks, which are not traced")
        if hooks["_forward_hooks"] or hooks["_forward_pre_hooks"]:
            # nn.Module's own code, whose reads of the hook dicts are guarded (a hook added or removed recompiles)
            with tx.output.module_scope(self):
                return tx.inline_call(UserFunctionVar(torch.nn.Module._call_impl, None), [self, *args], kwargs)
        # Hooks registered later would run around forward: the entry holds only while there are none.
        tx.output.guard("no_module_hooks", self.source, module)
        tx.output.guard("global_module_hooks", SOURCELESS)
        if "forward" in vars(module):
            # ``self.forward = self.forward_split_cat`` in __init__: Module.__call__ reads the instance's own
            with tx.output.module_scope(self):
                return self.getattr(tx, "forward").call(tx, args, kwargs)
        self.guard_not_shadowed(tx, "forward")
        forward = type(module).forward
        if not isinstance(forward, types.FunctionType):
            unsupported(f"{type(module).__name__}.forward is not a Python function")
        class_path = _attr_path(self, "__class__")
        forward_path = class_path and Attr(class_path, "forward")
        tx.output.guard("function_match", forward_path, forward)
        forward_vt = UserFunctionVar(forward, forward_path)
        with tx.output.module_scope(self):
            return forward_vt.call(tx, [self, *args], kwargs)

    def call_method(self, tx: Tracer, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        return self.getattr(tx, name).call(tx, args, kwargs)

    def unpack(self, tx: Tracer) -> list[VT]:
        module = self.value
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)):
            return [self.getattr(tx, key) for key in module._modules]
        if isinstance(module, torch.nn.ModuleDict):
            return [ConstVar(key) for key in module._modules]
        unsupported(f"iterating over {type(module).__name__}")

    def getitem(self, tx: Tracer, key: VT) -> VT:
        module = self.value
        index = key.const()
        if isinstance(module, torch.nn.ModuleDict):
            return self.getattr(tx, index)
        if isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential)) and isinstance(index, (int, slice)):
            return _index_modules(tx, self, [self.getattr(tx, key) for key in module._modules], index)
        unsupported(f"indexing {type(module).__name__} with {index!r}")

    def truth(self, tx: Tracer) -> bool:
        if isinstance(self.value, (torch.nn.ModuleList, torch.nn.Sequential, torch.nn.ModuleDict)):
            return len(self.value) > 0
        return True


# A module's own hook dicts that Module.__call__ consults (those it has: older torch lacks some).
_MODULE_HOOKS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def _global_hooks() -> tuple[Any, ...]:
    from dynajit.guards import global_module_hooks_dicts

    return global_module_hooks_dicts()


def _index_modules(tx: Tracer, container: VT, items: list[VT], index: int | slice) -> VT:
    """``container[index]`` of a ModuleList or Sequential whose submodules are ``items``."""
    if isinstance(index, slice):
        return ModuleSliceVar(container, index, items[index])
    try:
        return items[index]
    except IndexError:
        raises_in_python(f"index {index} is out of range for {container.python_type().__name__} (IndexError)")


class ModuleSliceVar(VT):
    """``modules[a:b]`` of a ModuleList or Sequential: a new container of the same submodules.

    Its items are the original container's submodules, reached (and guarded) through the original, so the
    container made by each call never becomes a guarded value of its own.
    """

    def __init__(self, container: VT, index: slice, items: list[VT]) -> None:
        self.container = container
        self.index = index
        self.items = items

    def python_type(self) -> type:
        return self.container.python_type()

    def unpack(self, tx: Tracer) -> list[VT]:
        return list(self.items)

    def truth(self, tx: Tracer) -> bool:
        return bool(self.items)

    def getitem(self, tx: Tracer, key: VT) -> VT:
        index = key.const()
        if not isinstance(index, (int, slice)):
            unsupported(f"indexing {self.python_type().__name__} with {index!r}")
        return _index_modules(tx, self, self.items, index)

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        cls = self.python_type()
        if not issubclass(cls, torch.nn.Sequential) or cls.forward is not torch.nn.Sequential.forward:
            unsupported(f"calling a slice of {cls.__name__}")
        if kwargs or len(args) != 1:
            unsupported("a Sequential slice called with other than one positional argument")
        value = args[0]
        for module in self.items:  # what Sequential.forward does
            value = module.call(tx, [value], {})
        return value

    def children(self) -> list[VT]:
        return [self.container, *self.items]

    def reconstruct(self, cg: CodeGen) -> None:
        self.container.reconstruct(cg)
        cg.load_const(self.index)
        cg.subscr()

    def __repr__(self) -> str:
        return f"ModuleSliceVar({self.container!r}[{self.index!r}])"


# nn.Module methods that walk the module tree: answered from the real module, each item reached by its path.
_MODULE_ITERATORS = {
    "modules": ("named_modules", False),
    "named_modules": ("named_modules", True),
    "children": ("named_children", False),
    "named_children": ("named_children", True),
    "parameters": ("named_parameters", False),
    "named_parameters": ("named_parameters", True),
    "buffers": ("named_buffers", False),
    "named_buffers": ("named_buffers", True),
}


def _member_path(root: Any, qualname: str) -> Any:
    """The path of the submodule, parameter or buffer ``qualname`` (``"layers.0.weight"``) under ``root``."""
    path = root
    for part in qualname.split(".") if qualname else ():
        path = Attr(path, part) if path is not None else None
    return path


# The table of each module a walk reads its items from (named_modules and named_children read ``_modules``).
_WALKED_TABLES = {"named_parameters": "_parameters", "named_buffers": "_buffers"}


def _guard_walk(tx: Tracer, root: NNModuleVar, walker: str, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Guard what ``root.<walker>(...)`` reads besides the items it yields: for each module it goes through, the
    names and order of its submodules and of the parameters or buffers it yields, and which of them are None;
    each such module by identity. A parameter added anywhere in the tree (``register_parameter``, a new
    submodule) recompiles; one yielded once though reached twice (shared) is guarded as the same object there."""
    if root.source is None:
        return
    bound = inspect.signature(getattr(torch.nn.Module, walker)).bind(root.value, *args, **kwargs)
    bound.apply_defaults()
    recurse = walker == "named_modules" or bound.arguments.get("recurse", False)
    reached = list(root.value.named_modules(remove_duplicate=False)) if recurse else [("", root.value)]
    table = _WALKED_TABLES.get(walker)
    for qualname, module in reached:
        path = _member_path(root.source, qualname)
        if qualname:
            tx.wrap(module, path)
        tables = ["_modules"] if recurse or walker == "named_children" else []
        for name in [*tables, *([table] if table else [])]:
            entries = getattr(module, name)
            tx.output.guard("dict_keys", Attr(path, name), entries)
            for key, entry in entries.items():
                if entry is None:
                    tx.output.guard("is_none", Item(Attr(path, name), key))
                elif name != "_modules" and qualname:
                    tx.wrap(entry, Attr(path, key))  # (yielded once when shared: the same object at each path)


class _ModuleIterator(VT):
    """``module.modules`` / ``parameters`` / ... before the call."""

    def __init__(self, module: NNModuleVar, name: str) -> None:
        self.module = module
        self.name = name

    def call(self, tx: Tracer, args: list[VT], kwargs: dict[str, VT]) -> VT:
        from dynajit.capture._symbolic.variables.containers import TupleVar
        from dynajit.capture._symbolic.variables.item_iterators import IteratorVar

        walker, named = _MODULE_ITERATORS[self.name]
        const_args = [a.const() for a in args]
        const_kwargs = {k: v.const() for k, v in kwargs.items()}
        _guard_walk(tx, self.module, walker, const_args, const_kwargs)
        items = []
        for qualname, value in getattr(self.module.value, walker)(*const_args, **const_kwargs):
            item = tx.wrap(value, _member_path(self.module.source, qualname))
            items.append(TupleVar([ConstVar(qualname), item]) if named else item)
        return IteratorVar(items)

    def children(self) -> list[VT]:
        return [self.module]
