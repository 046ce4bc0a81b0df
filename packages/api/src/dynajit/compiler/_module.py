"""``OptimizedModule``: an ``nn.Module`` whose calls run the compiled ``forward`` of the module it wraps.

The wrapper is transparent: attributes, methods and parameters are the original
module's, ``state_dict()`` has the original's keys, and pickling stores the
original module plus the compile settings, so unpickling compiles afresh.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

import torch
from torch.utils.hooks import BackwardHook

from dynajit.compiler._compile import CompileSettings

__all__ = ["OptimizedModule"]

# The wrapper's own attributes; everything else is looked up on the original module.
_OWN_ATTRIBUTES = frozenset({"_orig_mod", "_compile_settings", "_decorate", "_compiled_forward", "_compiled_for"})


def _rebuild(module: torch.nn.Module, settings: CompileSettings) -> OptimizedModule:
    return OptimizedModule(module, settings)


class OptimizedModule(torch.nn.Module):
    """A compiled ``nn.Module``: calls run ``_orig_mod.forward`` through dynajit.

    Returned by ``dynajit.compiler.compile(module)``. Attribute and method access
    (reading, setting and deleting attributes) reach the original module (``_orig_mod``); ``parameters()`` are the original
    parameter objects; ``state_dict()`` and ``load_state_dict()`` use the original
    keys; ``.to()``, ``.train()`` and ``.eval()`` change the original module, and
    capture's guards recompile when that changes what the graph relied on. The
    original module's forward hooks, and its full backward and backward pre-hooks,
    run around the compiled forward as nn.Module runs them, in Python.
    ``bool``, ``len``, iteration, ``in`` and indexing (reading, setting, deleting
    items) are the original's, so a compiled container behaves as the container.
    """

    _orig_mod: torch.nn.Module

    def __init__(
        self,
        mod: torch.nn.Module,
        settings: CompileSettings,
        decorate: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None,
    ) -> None:
        if not isinstance(mod, torch.nn.Module):
            raise TypeError(f"OptimizedModule wraps an nn.Module, got {type(mod).__name__}")
        super().__init__()
        self._orig_mod = mod  # in _modules, for parameters() and state_dict()
        object.__setattr__(self, "_compile_settings", settings)
        object.__setattr__(self, "_decorate", decorate or settings.decorator())
        object.__setattr__(self, "_compiled_for", None)
        object.__setattr__(self, "_compiled_forward", None)
        self.training = mod.training
        self.register_state_dict_post_hook(_drop_wrapper_prefix)
        self.register_load_state_dict_pre_hook(_add_wrapper_prefix)

    def _forward_function(self, module: torch.nn.Module) -> Callable[..., Any]:
        # Compiled per forward function (one set on the instance, else the class's), so replacing ``forward``
        # on the original is honoured; the check reads two dicts, without making a bound method per call.
        target = module.__dict__.get("forward") or type(module).forward
        if self._compiled_for is not target:
            object.__setattr__(self, "_compiled_forward", self._decorate(module.forward))
            object.__setattr__(self, "_compiled_for", target)
        return self._compiled_forward  # type: ignore[return-value]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        module = self._original
        if module._forward_pre_hooks or module._forward_hooks or module._backward_hooks or module._backward_pre_hooks:
            return self._forward_with_hooks(module, args, kwargs)
        return self._forward_function(module)(*args, **kwargs)

    def _forward_with_hooks(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # In nn.Module's order: forward pre-hooks, the backward hooks' wrapping of the inputs, forward, forward
        # hooks, the wrapping of the outputs. (Global hooks are the wrapper's: nn.Module runs them once, for it.)
        if module._backward_hooks and module._is_full_backward_hook is False:
            raise NotImplementedError(
                "OptimizedModule does not run hooks registered with the deprecated register_backward_hook; "
                "register them with register_full_backward_hook, or call the module without compiling it"
            )
        args, kwargs = _run_pre_hooks(module, args, kwargs)
        backward = None
        if module._backward_hooks or module._backward_pre_hooks:
            full, before = list(module._backward_hooks.values()), list(module._backward_pre_hooks.values())
            backward = BackwardHook(module, full, before)
            args = backward.setup_input_hook(args)
        result = self._forward_function(module)(*args, **kwargs)
        result = _run_forward_hooks(module, args, kwargs, result)
        if backward is not None:
            if not isinstance(result, (torch.Tensor, tuple)):
                warnings.warn(
                    "For backward hooks to be called, module output should be a Tensor or a tuple of Tensors"
                    f" but received {type(result)}",
                    stacklevel=3,
                )
            result = backward.setup_output_hook(result)
        return result

    @property
    def _original(self) -> torch.nn.Module:
        """``_orig_mod`` without the ``__getattr__`` detour (nn.Module keeps submodules in ``_modules``)."""
        return self.__dict__["_modules"]["_orig_mod"]

    def __getattr__(self, name: str) -> Any:
        if name in _OWN_ATTRIBUTES:
            if name == "_orig_mod":
                return self._modules["_orig_mod"]
            raise AttributeError(name)
        return getattr(self._modules["_orig_mod"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        # Plain attributes belong to the original module, which the compiled forward reads;
        # the wrapper keeps only its own bookkeeping (and nn.Module's, set before _orig_mod exists).
        modules = self.__dict__.get("_modules")
        if name in _OWN_ATTRIBUTES or name == "training" or not modules or "_orig_mod" not in modules:
            super().__setattr__(name, value)
        else:
            setattr(modules["_orig_mod"], name, value)

    def __delattr__(self, name: str) -> None:
        if name in _OWN_ATTRIBUTES or name in self.__dict__:
            super().__delattr__(name)
        else:
            delattr(self._orig_mod, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(dir(self._orig_mod)))

    def __repr__(self) -> str:
        return f"OptimizedModule({self._orig_mod!r})"

    # The container protocols (nn.Sequential, ModuleList, ModuleDict, ParameterList, ...) are looked up on the
    # type, never through __getattr__: forward them, so the wrapper sizes, tests, iterates and indexes as the
    # original does, and raises the original's TypeError where the original has no such protocol.
    @property
    def _container(self) -> Any:
        """The original module, typed for the protocols only some modules have."""
        return self.__dict__["_modules"]["_orig_mod"]

    def __bool__(self) -> bool:
        return bool(self._container)

    def __len__(self) -> int:
        return len(self._container)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._container)

    def __contains__(self, item: Any) -> bool:
        return item in self._container

    def __getitem__(self, key: Any) -> Any:
        return self._container[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._container[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._container[key]

    def train(self, mode: bool = True) -> OptimizedModule:
        self._orig_mod.train(mode)
        self.training = mode
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._orig_mod, self._compile_settings))


def _run_pre_hooks(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    for hook_id, hook in list(module._forward_pre_hooks.items()):
        if hook_id in module._forward_pre_hooks_with_kwargs:
            result = hook(module, args, kwargs)
            if result is not None:
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    return args, kwargs


def _run_forward_hooks(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> Any:
    for hook_id, hook in list(module._forward_hooks.items()):
        if hook_id in module._forward_hooks_with_kwargs:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output


_WRAPPED = "_orig_mod"


def _drop_wrapper_prefix(
    module: torch.nn.Module, state_dict: MutableMapping[str, Any], prefix: str, _meta: Any
) -> None:
    """State-dict post hook: ``<prefix>_orig_mod.<key>`` becomes ``<prefix><key>``, order kept."""
    wrapped = prefix + _WRAPPED + "."
    for key in [key for key in state_dict if key.startswith(wrapped)]:
        state_dict[prefix + key[len(wrapped) :]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in [key for key in metadata if key == prefix + _WRAPPED or key.startswith(wrapped)]:
            renamed = prefix + key[len(wrapped) :] if key.startswith(wrapped) else prefix.rstrip(".")
            metadata[renamed] = metadata.pop(key)


def _add_wrapper_prefix(module: torch.nn.Module, state_dict: MutableMapping[str, Any], prefix: str, *_: Any) -> None:
    """Load-state-dict pre hook: accept the original module's keys by moving them under ``_orig_mod.``."""
    wrapped = prefix + _WRAPPED + "."
    for key in [key for key in state_dict if key.startswith(prefix) and not key.startswith(wrapped)]:
        state_dict[wrapped + key[len(prefix) :]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None and prefix.rstrip(".") in metadata:
        metadata.setdefault(prefix + _WRAPPED, metadata[prefix.rstrip(".")])
