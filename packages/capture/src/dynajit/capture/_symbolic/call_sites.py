"""Frames marked ``disable(fn, recursive=False)``: run in Python, with every call site intercepted.

The function's own code runs as it is, except that the callable of each call
goes through ``__dynajit_intercept`` first, so the user functions it calls are
compiled while its own frame is not traced.

The callable sits at a fixed depth below a call's arguments once every method
load is rewritten into an attribute load plus a NULL (a method load may push a
NULL where the callable would be, in 3.11 and 3.12): the rewrite swaps the
callable to the top, calls the interceptor on it with a method-style call (no
NULL needed) and swaps it back.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any

import bytecode

from dynajit.capture._symbolic.instructions import PY, split_local_pairs

__all__ = ["INTERCEPT", "frame_only_function", "intercept_call_sites"]

INTERCEPT = "__dynajit_intercept"

_rewritten: weakref.WeakKeyDictionary[types.CodeType, types.CodeType] = weakref.WeakKeyDictionary()
_made: weakref.WeakKeyDictionary[types.FunctionType, types.FunctionType] = weakref.WeakKeyDictionary()


def _callable_depth(inst: bytecode.Instr) -> int | None:
    """How deep below the top of the stack a call instruction finds its callable (None: not a call)."""
    n = inst.arg if isinstance(inst.arg, int) else 0
    table: dict[str, Callable[[], int]] = {
        # 3.11/3.12: [NULL, callable, args]; 3.13: [callable, NULL, args] (+ the keyword names tuple).
        "CALL": lambda: n + 1 if PY < (3, 13) else n + 2,
        "CALL_KW": lambda: n + 3,
        "CALL_FUNCTION_EX": lambda: (2 if PY < (3, 13) else 3) + (n & 1),
    }
    entry = table.get(inst.name)
    return entry() if entry is not None else None


def _instr(name: str, arg: Any, like: bytecode.Instr) -> bytecode.Instr:
    return bytecode.Instr(name, arg, location=like.location)


def _wrap_at(depth: int, like: bytecode.Instr) -> list[bytecode.Instr]:
    """Replace the value ``depth`` deep in the stack by ``__dynajit_intercept(value)``."""
    swap = [_instr("SWAP", depth, like)] if depth > 1 else []
    call = [_instr("LOAD_GLOBAL", (False, INTERCEPT), like), _instr("SWAP", 2, like)]
    if PY < (3, 12):
        call.append(_instr("PRECALL", 0, like))
    call.append(_instr("CALL", 0, like))  # [intercept, value]: called method-style, intercept(value)
    return [*swap, *call, *swap]


def _without_method_bit(inst: bytecode.Instr) -> list[bytecode.Instr] | None:
    """A method load as an attribute load followed by the NULL of a plain call (None: not a method load)."""
    if inst.name == "LOAD_METHOD":
        plain = _instr("LOAD_ATTR", inst.arg, inst)
    elif inst.name == "LOAD_ATTR" and isinstance(inst.arg, tuple) and inst.arg[0]:
        plain = _instr("LOAD_ATTR", (False, inst.arg[1]), inst)
    elif inst.name == "LOAD_SUPER_ATTR" and isinstance(inst.arg, tuple) and inst.arg[0]:
        plain = _instr("LOAD_SUPER_ATTR", (False, *inst.arg[1:]), inst)
    else:
        return None
    null = [_instr("PUSH_NULL", bytecode.UNSET, inst)]
    return [plain, *null] if PY >= (3, 13) else [plain, *null, _instr("SWAP", 2, inst)]


def intercept_call_sites(code: types.CodeType) -> types.CodeType:
    """``code`` with the callable of every call passed through ``__dynajit_intercept`` (cached per code)."""
    if code in _rewritten:
        return _rewritten[code]
    from dynajit.capture._frame import Unsupported
    from dynajit.capture._symbolic.resume import set_region_depths

    original = bytecode.Bytecode.from_code(code)
    try:
        # Each region keeps its depth from the table: the bytecode package's flow analysis cannot reach a
        # handler entered only by an exception (a raise-resume function's prologue raising into one).
        set_region_depths(code, original)
        known_depths = True
    except Unsupported:
        known_depths = False
    body: list[Any] = []
    pending_call_setup: list[Any] = []  # KW_NAMES / PRECALL: must stay right before their CALL
    for item in original:
        if isinstance(item, bytecode.Instr) and item.name in ("KW_NAMES", "PRECALL"):
            pending_call_setup.append(item)
            continue
        if isinstance(item, bytecode.Instr):
            normalised = _without_method_bit(item)
            if normalised is not None:
                body.extend([*pending_call_setup, *normalised])
                pending_call_setup = []
                continue
            depth = _callable_depth(item)
            if depth is not None:
                body.extend(_wrap_at(depth, item))
        body.extend(pending_call_setup)
        pending_call_setup = []
        body.append(item)
    new = bytecode.Bytecode([part for item in body for part in split_local_pairs(item)])
    new._copy_attr_from(original)
    result = new.to_code(compute_exception_stack_depths=not known_depths)
    if known_depths:
        # Each wrapped call holds one more item while it runs; the flow analysis may miss handlers too.
        result = result.replace(co_stacksize=max(result.co_stacksize, code.co_stacksize + 1))
    _rewritten[code] = result
    return result


def frame_only_function(fn: Any, intercept: Callable[[Any], Any]) -> Any:
    """``fn`` running its own frame in Python with its call sites intercepted (a bound method stays bound)."""
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return types.MethodType(frame_only_function(fn.__func__, intercept), fn.__self__)
    if not isinstance(fn, types.FunctionType):
        return fn  # a module or other callable: it runs in Python as it is
    made = _made.get(fn)
    if made is None:
        code = intercept_call_sites(fn.__code__)
        made = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        made.__kwdefaults__ = fn.__kwdefaults__
        made.__qualname__ = fn.__qualname__
        _made[fn] = made
    fn.__globals__[INTERCEPT] = intercept
    return made
