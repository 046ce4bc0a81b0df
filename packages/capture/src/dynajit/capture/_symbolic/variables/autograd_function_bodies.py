"""What an autograd Function's own methods may read for its call to stay one graph node, and the guards on it.

The node runs the Function for real, and a backend that traces it (AOT
autograd) keeps what ``forward`` and ``backward`` computed from Python values
when it traced them. So the bodies are read instruction by instruction, before
the call is recorded: every global they read (a module and the attributes
read from it, a builtin, a constant) is guarded where they read it, through
the method's ``__globals__``, and a body that could have an effect Python sees
or read a fact no guard can hold is a graph break with its reason, so the
Function runs in Python, as in eager: a global written or holding a mutable
object, a closure variable, an attribute written on anything but ``ctx``, an
import, a call of ``print`` and its kin or of torch's ``manual_seed`` and
``set_*`` functions. A helper function of the program's
own is read by the same rules, its identity and defaults guarded. Running the
forward on fake tensors while tracing then has no effect a user can see either.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.variables.base import unsupported
from dynajit.capture._symbolic.variables.constant import GUARDED_SCALARS

if TYPE_CHECKING:
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.paths import Path

__all__ = ["guard_function_bodies", "overrides"]

METHODS = ("forward", "backward", "vjp", "setup_context")  # (``vjp``: the backward's other name)
# Modules whose contents are library code: their functions compute from their arguments.
_LIBRARY_MODULES = ("torch", "math", "operator", "numbers", "typing", "builtins")
_EFFECTFUL_BUILTINS = frozenset(
    "print open input exec eval compile setattr delattr globals locals vars breakpoint __import__ exit quit help".split()
)
# torch's functions that change process state (the RNG, defaults, flags) or touch files
_EFFECTFUL_TORCH = frozenset("manual_seed seed save load use_deterministic_algorithms".split())
_EQUAL_VALUES = (torch.dtype, torch.device, torch.layout, torch.memory_format)
_ATTRIBUTE_READS = ("LOAD_ATTR", "LOAD_METHOD")
_HELPER_DEPTH = 4  # helpers calling helpers, this deep; a deeper call is a graph break
_CTX_LOADS = ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_FAST_LOAD_FAST")
_REFUSED = {
    "STORE_GLOBAL": "writes a global",
    "DELETE_GLOBAL": "deletes a global",
    "IMPORT_NAME": "imports a module",
}


def guard_function_bodies(output: OutputGraph, cls: type, cls_path: Path | None) -> None:
    """Guard every global ``cls``'s methods read, or stop with the reason one of them cannot be one graph node."""
    for name in METHODS:
        method = getattr(cls, name, None)
        if method is None or not overrides(cls, name):
            continue
        fn, fn_path = _unwrapped(method, _attr(cls_path, name))
        where = f"autograd Function {cls.__qualname__}.{name}"
        if not isinstance(fn, types.FunctionType):
            unsupported(f"{where} is not a Python function ({type(fn).__name__}): it runs in Python")
        takes_ctx = name != "forward" or not overrides(cls, "setup_context")
        ctx = fn.__code__.co_varnames[0] if takes_ctx and fn.__code__.co_argcount else None
        _read_function(output, fn, fn_path, ctx, where, depth=0)


def _read_function(
    output: OutputGraph, fn: types.FunctionType, fn_path: Path | None, ctx: str | None, where: str, depth: int
) -> None:
    """Guard the globals ``fn`` reads (helper functions it calls read in turn), or stop naming what it does."""
    if fn.__code__.co_freevars:
        unsupported(f"{where} reads variables of an enclosing function ({', '.join(fn.__code__.co_freevars)})")
    for code in _codes(fn.__code__):
        for global_name, attributes in _global_reads(code, ctx, where):
            _guard_global(output, fn, fn_path, global_name, attributes, where, depth)


def overrides(cls: type, name: str) -> bool:
    """Whether the Function class ``cls`` defines ``name`` itself (not ``torch.autograd.Function``'s)."""
    return getattr(cls, name, None) is not getattr(torch.autograd.Function, name, None)


def _unwrapped(fn: Any, path: Path | None) -> tuple[Any, Path | None]:
    """``fn`` without torch's own decorators (``once_differentiable``, ``custom_fwd``): their bodies are torch's."""
    while (
        isinstance(fn, types.FunctionType)
        and hasattr(fn, "__wrapped__")
        and str(fn.__globals__.get("__name__", "")).split(".")[0] == "torch"  # (wraps copies __module__)
    ):
        fn, path = fn.__wrapped__, _attr(path, "__wrapped__")
    return fn, path


def _attr(path: Path | None, name: str) -> Path | None:
    from dynajit.capture._symbolic.paths import Attr

    return None if path is None else Attr(path, name)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and the code of the lambdas, comprehensions and nested functions inside it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _global_reads(code: types.CodeType, ctx: str | None, where: str) -> list[tuple[str, list[str]]]:
    """The globals ``code`` reads, each with the attribute names read from it at once (``torch.nn.functional``)."""
    instructions = list(dis.get_instructions(code))
    reads: list[tuple[str, list[str]]] = []
    for i, ins in enumerate(instructions):
        if ins.opname in _REFUSED:
            unsupported(f"{where} {_REFUSED[ins.opname]} ({ins.argval}): it runs in Python")
        if ins.opname in ("STORE_ATTR", "DELETE_ATTR") and not (i and _loads_ctx(instructions[i - 1], ctx)):
            unsupported(f"{where} writes attribute {ins.argval!r} of an object other than ctx: it runs in Python")
        if ins.opname == "LOAD_GLOBAL":
            attributes = []
            for later in instructions[i + 1 :]:
                if later.opname not in _ATTRIBUTE_READS:
                    break
                attributes.append(later.argval)
            reads.append((ins.argval, attributes))
    return reads


def _loads_ctx(ins: dis.Instruction, ctx: str | None) -> bool:
    if ctx is None or ins.opname not in _CTX_LOADS:
        return False
    return (ins.argval[-1] if isinstance(ins.argval, tuple) else ins.argval) == ctx


def _guard_global(
    output: OutputGraph,
    fn: types.FunctionType,
    fn_path: Path | None,
    name: str,
    attributes: list[str],
    where: str,
    depth: int,
) -> None:
    """Guard the value ``name.attr1.attr2...`` has where ``fn`` reads it, as far as the reads go through modules."""
    from dynajit.capture._symbolic.paths import Attr, Item, builtin_path, builtins_of

    namespace = _attr(fn_path, "__globals__")
    if name in fn.__globals__:
        value, path = fn.__globals__[name], None if namespace is None else Item(namespace, name)
    else:
        table = builtins_of(fn.__globals__)
        if name not in table:
            return  # a NameError when it runs, in eager as in the graph
        if name in _EFFECTFUL_BUILTINS:
            unsupported(f"{where} calls {name}(): it runs in Python")
        value, path = table[name], None
        if namespace is not None and "__builtins__" in fn.__globals__:
            output.guard("dict_contains", namespace, name, False)  # a global of that name made later shadows it
            path = builtin_path(namespace, fn.__globals__, name)
    if isinstance(value, types.ModuleType) and not _library(value.__name__):
        unsupported(f"{where} reads module {value.__name__} ({name}), whose attributes are not guarded")
    for attribute in attributes:
        if not isinstance(value, types.ModuleType) or not hasattr(value, attribute):
            break
        value, path = getattr(value, attribute), None if path is None else Attr(path, attribute)
    if path is None:
        unsupported(f"{where} reads global {name}, which no guard can reach: it runs in Python")
    if isinstance(value, GUARDED_SCALARS):
        output.guard("constant_match", path, value)
    elif isinstance(value, _EQUAL_VALUES) or (
        type(value) is tuple and all(isinstance(v, GUARDED_SCALARS) for v in value)
    ):
        output.guard("equals_match", path, value)
    elif isinstance(value, types.ModuleType) or _library_code(value):
        if _effectful(value):
            unsupported(f"{where} calls {value.__module__}.{value.__name__}(), which changes state: it runs in Python")
        output.guard("id_match", path, value)
    elif isinstance(value, types.FunctionType) and depth < _HELPER_DEPTH and value is not fn:
        # A helper of the program's own (timm's ``swish_fwd``): the same rules hold for its body and defaults.
        output.guard("function_match", path, value)
        for defaults in ("__defaults__", "__kwdefaults__"):
            held = getattr(value, defaults)
            if held is not None and not all(isinstance(v, GUARDED_SCALARS) for v in _values(held)):
                unsupported(f"{where} calls {name}, whose default arguments are objects it could change")
            output.guard("equals_match", Attr(path, defaults), held)
        _read_function(output, value, path, None, f"{where} → {value.__qualname__}", depth + 1)
    else:
        unsupported(f"{where} reads global {name} ({type(value).__name__}), which it could change or depend on")


def _values(defaults: tuple[Any, ...] | dict[str, Any]) -> list[Any]:
    return list(defaults.values()) if isinstance(defaults, dict) else list(defaults)


def _library(module: str) -> bool:
    return module.split(".")[0] in _LIBRARY_MODULES


def _effectful(value: Any) -> bool:
    """``print`` and its kin however reached (``builtins.print``), and torch's ``manual_seed``, ``set_*``, ..."""
    name, module = getattr(value, "__name__", ""), getattr(value, "__module__", None) or ""
    if module == "builtins":
        return name in _EFFECTFUL_BUILTINS
    return module.split(".")[0] == "torch" and callable(value) and (name in _EFFECTFUL_TORCH or name.startswith("set_"))


def _library_code(value: Any) -> bool:
    """A class or function of a library module (not an object holding state: a tensor, a module instance)."""
    if not _library(getattr(value, "__module__", None) or ""):
        return False
    return isinstance(value, type) or (callable(value) and not isinstance(value, (torch.Tensor, torch.nn.Module)))
