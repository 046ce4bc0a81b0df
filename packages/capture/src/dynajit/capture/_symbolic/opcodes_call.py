"""Opcode handlers: attribute access, calls (CALL, CALL_KW, CALL_FUNCTION_EX) and function creation."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from dynajit.capture._symbolic.registry import handler
from dynajit.capture._symbolic.variables import (
    VT,
    DictVar,
    NestedFunctionVar,
    NullVar,
    unsupported,
)
from dynajit.capture._symbolic.variables.objects import make_super

if TYPE_CHECKING:
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer


@handler("LOAD_ATTR", "LOAD_METHOD")
def _load_attr(tx: Tracer, inst: Inst) -> None:
    obj = tx.pop()
    _push_attr(tx, inst, obj.getattr(tx, inst.arg))


@handler("LOAD_SUPER_ATTR", since=(3, 12))
def _load_super_attr(tx: Tracer, inst: Inst) -> None:
    obj = tx.pop()
    cls = tx.pop()
    tx.pop()  # the global `super` itself
    _push_attr(tx, inst, make_super(tx, [cls, obj]).getattr(tx, inst.arg))


def _push_attr(tx: Tracer, inst: Inst, attr: VT) -> None:
    if inst.method:
        # A method load pushes (NULL, attribute): the bound form is kept inside the tracker.
        if tx.version >= (3, 13):
            tx.push(attr)
            tx.push(NullVar())
        else:
            tx.push(NullVar())
            tx.push(attr)
    else:
        tx.push(attr)


@handler("STORE_ATTR")
def _store_attr(tx: Tracer, inst: Inst) -> None:
    obj = tx.pop()
    value = tx.pop()
    obj.setattr(tx, inst.arg, value)


@handler("DELETE_ATTR")
def _delete_attr(tx: Tracer, inst: Inst) -> None:
    """``del obj.name``: of an object made while tracing, part of the state it is rebuilt with
    (``contextlib.contextmanager``'s ``__enter__`` deletes its arguments); of another, a graph break."""
    from dynajit.capture._symbolic.variables.attribute_reads import call_delattr
    from dynajit.capture._symbolic.variables.constant import ConstVar

    call_delattr(tx, [tx.pop(), ConstVar(inst.arg)], {})


def _callable_and_args(tx: Tracer, first: VT, second: VT, args: list[VT]) -> tuple[VT, list[VT]]:
    """Sort out the two slots below a call's arguments (their order changed in 3.13)."""
    if tx.version >= (3, 13):
        return (first, args) if isinstance(second, NullVar) else (first, [second, *args])
    if isinstance(first, NullVar):
        return second, args
    return first, [second, *args]


def _split_kwargs(args: list[VT], names: tuple[str, ...]) -> tuple[list[VT], dict[str, VT]]:
    if not names:
        return args, {}
    split = len(args) - len(names)
    return args[:split], dict(zip(names, args[split:]))


@handler("CALL")
def _call(tx: Tracer, inst: Inst) -> None:
    args = tx.popn(inst.arg)
    second = tx.pop()
    first = tx.pop()
    fn, args = _callable_and_args(tx, first, second, args)
    names = tx.kw_names
    tx.kw_names = ()
    positional, kwargs = _split_kwargs(args, names)
    tx.push(tx.call(fn, positional, kwargs))


@handler("CALL_KW", since=(3, 13))
def _call_kw(tx: Tracer, inst: Inst) -> None:
    names = tuple(tx.pop().const())
    args = tx.popn(inst.arg)
    second = tx.pop()
    first = tx.pop()
    fn, args = _callable_and_args(tx, first, second, args)
    positional, kwargs = _split_kwargs(args, names)
    tx.push(tx.call(fn, positional, kwargs))


@handler("CALL_FUNCTION_EX")
def _call_function_ex(tx: Tracer, inst: Inst) -> None:
    kwargs_vt = tx.pop() if inst.arg & 1 else DictVar({})
    args_vt = tx.pop()
    second = tx.pop()
    first = tx.pop()
    if tx.version >= (3, 13):
        fn = first
    else:
        fn = second if isinstance(first, NullVar) else first
    if not isinstance(kwargs_vt, DictVar):
        unsupported(f"**{kwargs_vt} in a call")
    tx.push(tx.call(fn, args_vt.unpack(tx), {str(k): v for k, v in kwargs_vt.items.items()}))


@handler("MAKE_FUNCTION")
def _make_function(tx: Tracer, inst: Inst) -> None:
    code = tx.pop().const()
    flags = inst.arg if tx.version < (3, 13) else 0
    closure = tx.pop() if flags & 0x08 else None
    if flags & 0x04:
        tx.pop()  # annotations are not needed to run the function (reading them back is refused)
    kwdefaults = tx.pop() if flags & 0x02 else None
    defaults = tx.pop() if flags & 0x01 else None
    made = NestedFunctionVar(code, tx.f_globals, tx.global_path, defaults, kwdefaults, closure, bool(flags & 0x04))
    tx.push(made)


@handler("SET_FUNCTION_ATTRIBUTE", since=(3, 13))
def _set_function_attribute(tx: Tracer, inst: Inst) -> None:
    fn = tx.pop()
    value = tx.pop()
    if not isinstance(fn, NestedFunctionVar):
        unsupported("SET_FUNCTION_ATTRIBUTE on something else than a new function")
    flag = int(inst.arg)
    if flag & 0x08:
        fn.closure_vt = value
    elif flag & 0x02:
        fn.kwdefaults_vt = value
    elif flag & 0x01:
        fn.defaults_vt = value
    elif flag & 0x04:
        fn.annotated = True
    tx.push(fn)


@handler("IMPORT_NAME")
def _import_name(tx: Tracer, inst: Inst) -> None:
    """An import of a module that is already imported only binds a name: it is traced; anything else runs
    the module's code, so it is a graph break."""
    fromlist = tx.pop().const()
    level = tx.pop().const()
    name = inst.arg
    if level:
        package = tx.f_globals.get("__package__") or ""
        base = package.rsplit(".", level - 1)[0] if level > 1 else package
        name = f"{base}.{name}" if name else base
    module = sys.modules.get(name)
    if module is None or any(part not in sys.modules for part in _parents(name)):
        unsupported(f"import of {name}, which is not imported yet, runs in Python")
    tx.push(tx.wrap(sys.modules[name.split(".")[0]] if not fromlist and not level else module, None))


@handler("IMPORT_FROM")
def _import_from(tx: Tracer, inst: Inst) -> None:
    module = tx.stack[-1]
    value = getattr(module.const(), inst.arg, None) if module.is_const() else None
    submodule = sys.modules.get(f"{getattr(module.const(), '__name__', '')}.{inst.arg}") if value is None else None
    if value is None and submodule is None:
        unsupported(f"from-import of {inst.arg}, which is not loaded yet, runs in Python")
    tx.push(tx.wrap(value if value is not None else submodule, None))


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]
