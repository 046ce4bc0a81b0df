"""Generated dispatchers: Python source with the compiled function's own signature, so Python binds the arguments.

A dispatcher tries each cache entry's compiled guard, most recent first, as
an unrolled chain (``if g0(a, b): return f0(a, b)``) and falls through to the
miss handler. Its code is regenerated (and swapped into the same function
object) whenever the entries change, so the hot path holds no loop, no dict
and no re-binding of keyword arguments.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "UNSET",
    "ArgumentLayout",
    "Branch",
    "binder",
    "call_with_values",
    "default_reads",
    "dispatcher_source",
    "layout_of",
    "marked_defaults",
    "take_name",
]


@dataclass(frozen=True)
class ArgumentLayout:
    """How a code object takes its arguments, rendered as source fragments.

    ``values`` lists the arguments in ``co_varnames`` order (positional,
    keyword-only, the ``*args`` tuple, the ``**kwargs`` dict): the order guard
    checks and ``convert_frame`` receive them in. ``call`` re-passes them to a
    function with the same layout.
    """

    names: tuple[str, ...]
    n_positional: int
    kwonly: tuple[str, ...]
    varargs: str | None
    varkw: str | None
    params: str
    values: str
    call: str


def layout_of(code: types.CodeType) -> ArgumentLayout:
    """The argument layout of ``code``."""
    n_pos, n_kwonly = code.co_argcount, code.co_kwonlyargcount
    has_varargs = bool(code.co_flags & inspect.CO_VARARGS)
    has_varkw = bool(code.co_flags & inspect.CO_VARKEYWORDS)
    n_args = n_pos + n_kwonly + has_varargs + has_varkw
    names = tuple(code.co_varnames[:n_args])
    positional, kwonly = names[:n_pos], names[n_pos : n_pos + n_kwonly]
    varargs = names[n_pos + n_kwonly] if has_varargs else None
    varkw = names[-1] if has_varkw else None

    params = list(positional)
    if code.co_posonlyargcount:
        params.insert(code.co_posonlyargcount, "/")
    if varargs:
        params.append(f"*{varargs}")
    elif kwonly:
        params.append("*")
    params += kwonly
    if varkw:
        params.append(f"**{varkw}")

    call = list(positional) + ([f"*{varargs}"] if varargs else []) + [f"{k}={k}" for k in kwonly]
    call += [f"**{varkw}"] if varkw else []
    return ArgumentLayout(
        names=names,
        n_positional=n_pos,
        kwonly=kwonly,
        varargs=varargs,
        varkw=varkw,
        params=", ".join(params),
        values=", ".join(names) + ("," if len(names) == 1 else ""),
        call=", ".join(call),
    )


def call_with_values(fn: Callable[..., Any], layout: ArgumentLayout, values: Sequence[Any]) -> Any:
    """Call ``fn`` with argument values given in ``co_varnames`` order (the slow path's re-binding)."""
    n = layout.n_positional
    positional = tuple(values[:n])
    kwargs = dict(zip(layout.kwonly, values[n : n + len(layout.kwonly)]))
    index = n + len(layout.kwonly)
    if layout.varargs:
        positional += tuple(values[index])
        index += 1
    if layout.varkw:
        kwargs.update(values[index])
    return fn(*positional, **kwargs)


def internal_prefix(layout: ArgumentLayout) -> str:
    """A prefix for the dispatcher's own names that no argument name starts with."""
    prefix = "__dj_"
    while any(name.startswith(prefix) for name in layout.names):
        prefix = prefix[:-1] + "x_"
    return prefix


@dataclass(frozen=True)
class Branch:
    """One rung of the chain: call ``run`` when ``check`` (a global name, or None for always) passes.

    ``scoped``: ``run`` executes with the running settings set (its code may call the interceptor).
    """

    check: str | None
    run: str
    scoped: bool = True


def _scoped_call(prefix: str, call: str, indent: str) -> list[str]:
    return [
        f"{indent}{prefix}token = {prefix}enter({prefix}settings)",
        f"{indent}try:",
        f"{indent}    return {call}",
        f"{indent}finally:",
        f"{indent}    {prefix}leave({prefix}token)",
    ]


def dispatcher_source(
    name: str, layout: ArgumentLayout, prefix: str, branches: Sequence[Branch], reads: str = "", stale: str = ""
) -> str:
    """Source of ``def <name>(<signature>)`` that walks ``branches`` in order and ends in the miss handler.

    Guard checks run as they are; the running settings are set (and restored
    in ``finally``) only around a scoped branch's run and the miss handler, so
    a hit on an entry that only calls its compiled graphs pays for nothing else.
    The globals it reads: ``<prefix>enter`` / ``<prefix>leave`` (set and
    restore the running settings, e.g. a context variable's ``set`` and
    ``reset``), ``<prefix>settings``, ``<prefix>miss`` (called with the values
    when no branch applies) and each branch's names. ``stale``, when given, is a condition under which the
    call goes to ``<prefix>recode`` first (the function's code was replaced since the dispatcher was made).
    """
    lines = [f"def {name}({layout.params}):"]
    if stale:
        lines.append(f"    if {stale}: return {prefix}recode({layout.call})")
    lines += reads.splitlines()
    for branch in branches:
        call = f"{branch.run}({layout.call})"
        indent = "    " if branch.check is None else "        "
        if branch.check is not None:
            lines.append(f"    if {branch.check}({layout.values}):")
        lines += _scoped_call(prefix, call, indent) if branch.scoped else [f"{indent}return {call}"]
        if branch.check is None:
            break
    else:
        lines += _scoped_call(prefix, f"{prefix}miss({layout.values})", "    ")
    return "\n".join([*lines, ""])


def passthrough_source(name: str, layout: ArgumentLayout, target: str, reads: str = "") -> str:
    """Source of ``def <name>(<signature>)`` that only calls ``target`` (the ``force_eager`` stance)."""
    return f"def {name}({layout.params}):\n{reads}    return {target}({layout.call})\n"


class _Unset:
    """The default a dispatcher's signature gives each parameter that has one: "not passed"."""

    def __repr__(self) -> str:
        return "<default>"


UNSET = _Unset()


def marked_defaults(fn: types.FunctionType) -> tuple[tuple[Any, ...] | None, dict[str, Any] | None]:
    """``__defaults__`` and ``__kwdefaults__`` for a dispatcher of ``fn``: :data:`UNSET` for each default."""
    positional = None if fn.__defaults__ is None else (UNSET,) * len(fn.__defaults__)
    keyword = None if fn.__kwdefaults__ is None else dict.fromkeys(fn.__kwdefaults__, UNSET)
    return positional, keyword


def default_reads(fn: types.FunctionType, layout: ArgumentLayout, marker: str, target: str) -> str:
    """Dispatcher lines giving each parameter not passed ``target``'s default as it is at the call.

    ``fn.__defaults__``/``__kwdefaults__`` may be replaced after the dispatcher is made; eager binds the
    defaults current at each call, so the dispatcher reads them there too (a positional default by its
    place from the end, as Python aligns them). ``marker`` names :data:`UNSET` in the dispatcher's globals.
    """
    positional = layout.names[: layout.n_positional]
    with_default = positional[len(positional) - len(fn.__defaults__ or ()) :]
    lines = [
        f"    if {name} is {marker}: {name} = {target}.__defaults__[{index - len(with_default)}]\n"
        for index, name in enumerate(with_default)
    ]
    lines += [
        f"    if {name} is {marker}: {name} = {target}.__kwdefaults__[{name!r}]\n"
        for name in layout.kwonly
        if name in (fn.__kwdefaults__ or {})
    ]
    return "".join(lines)


def compile_function(source: str, name: str, namespace: dict[str, Any], filename: str) -> types.FunctionType:
    """Execute ``source`` (defining ``name``) in ``namespace`` and return the function, leaving ``namespace`` as it was."""
    exec(compile(source, filename, "exec"), namespace)
    return namespace.pop(name)


def take_name(generated: types.FunctionType, fn: types.FunctionType) -> None:
    """Give a generated function ``fn``'s names, so a call with bad arguments raises eager's own TypeError.

    CPython names the function in those messages from ``__qualname__`` (and the code's names in tracebacks).
    """
    generated.__code__ = generated.__code__.replace(co_name=fn.__name__, co_qualname=fn.__qualname__)
    generated.__name__, generated.__qualname__ = fn.__name__, fn.__qualname__


def binder(fn: types.FunctionType) -> Callable[..., tuple[Any, ...]]:
    """A function with ``fn``'s signature and defaults returning the argument values in ``co_varnames`` order."""
    layout = layout_of(fn.__code__)
    source = f"def bind({layout.params}):\n    return ({layout.values})\n"
    bind = compile_function(source, "bind", {}, f"<dynajit binder of {fn.__qualname__}>")
    take_name(bind, fn)
    bind.__defaults__ = fn.__defaults__
    bind.__kwdefaults__ = fn.__kwdefaults__
    return bind
