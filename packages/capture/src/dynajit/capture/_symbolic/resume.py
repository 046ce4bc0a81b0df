"""Resume functions: the rest of a function after a graph break, and which locals they need.

A resume function's code is the original code with a prologue that puts the
saved stack back (its first arguments; NULL slots are pushed again) and jumps
to the instruction where execution continues. Its remaining arguments are the
live locals, under their own names. Resume code objects are made once per
(code, target, stack layout, live locals), so a break in a loop reuses them.

A ``for`` loop's iterator on the stack is passed as what it iterates over and
made again by the prologue, so tracing the resume function iterates over known
items (a real iterator object could not be traced): the remaining items as a
tuple (:data:`ITER`, the prologue runs GET_ITER), or, for an iterator over a
list (whose later appends Python iterates too), the list itself and the
position reached (:data:`LIST_ITER`, GET_ITER then that many ``next`` calls). An iterator over a dict or a
set is a ``WatchedIteration`` (:data:`WATCHED`), which the resume function traces as Python's iterator over the
container; ``enumerate`` over one is passed as it and made again (:data:`ENUMERATE`).
The remaining count or the position is part of the layout: each step of an
unrolled loop gets its own resume code, with its own compiled entries. Each
step's resume function is called from the previous one's transformed code, so
the steps nest; past :data:`MAX_LOOP_STEPS` steps of one loop
(:func:`unrolled_too_far`) the rest of the loop runs in Python instead, its
calls still intercepted, rather than nest deep enough to exhaust Python's
recursion limit.
"""

from __future__ import annotations

import dis
import itertools
import types
from typing import Any

import bytecode

from dynajit.capture._symbolic.blocks import GRAD_EXIT_GLOBALS, Region, exception_entries
from dynajit.capture._symbolic.instructions import PY, Inst, decode, split_local_pairs
from dynajit.capture._symbolic.variables import unsupported

__all__ = [
    "GRAD_EXIT",
    "ENUMERATE",
    "ENUMERATE_GLOBAL",
    "ITER",
    "LIST_ITER",
    "LIST_ITERATOR_AT",
    "NULL",
    "TAKES_ARGUMENT",
    "VALUE",
    "WATCHED",
    "Slot",
    "live_locals",
    "passed_cells",
    "resume_code",
    "set_region_depths",
    "super_receiver",
]

# Stack slot kinds of a resume function's layout: (kind, count).
NULL = "null"  # a NULL slot: pushed again, no argument
VALUE = "value"  # the value itself
ITER = "iter"  # a tuple of the iterator's remaining items (count: how many)
LIST_ITER = "list_iter"  # the list an iterator runs over (count: the position reached)
WATCHED = "watched"  # a WatchedIteration over a dict or set (count: the position reached)
ENUMERATE = "enumerate"  # enumerate() over a WatchedIteration, passed as that (count: the next index)
Slot = tuple[str, int]
GRAD_EXIT = "grad_exit"  # a grad-mode block's exit, no argument (count: the mode it restores; see blocks.py)
TAKES_ARGUMENT = frozenset({VALUE, ITER, LIST_ITER, WATCHED, ENUMERATE})
_LOOP_STEPS = (ITER, LIST_ITER, WATCHED, ENUMERATE)  # kinds whose count is a loop's step
EXCEPTION = "___stackexc"  # the argument of a raise-resume function: the exception it raises again
LIST_ITERATOR_AT = "__dynajit_list_iterator_at"  # the global the prologue calls to rebuild a list iterator
ENUMERATE_GLOBAL = "__dynajit_enumerate"  # the global the prologue calls to make an ENUMERATE slot: builtins.enumerate

_resume_ids = itertools.count()
_cache: dict[tuple[Any, ...], tuple[str, types.CodeType]] = {}

MAX_LOOP_STEPS = 64  # loop steps, per loop, that get compiled resume functions
_loop_steps: dict[tuple[Any, ...], set[tuple[Slot, ...]]] = {}
# resume code -> (its original, the original's index of each of its instructions)
_origins: dict[types.CodeType, tuple[types.CodeType, tuple[int, ...]]] = {}

_STOPS = frozenset(
    {"RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP",
     "JUMP_BACKWARD_NO_INTERRUPT", "JUMP_NO_INTERRUPT"}
)  # fmt: skip
# The saved stack arrives in arguments named ``___stack<i>``; only the prologue reads them.
_STACK_PREFIX = "___stack"
_READS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR", "DELETE_FAST", "LOAD_DEREF", "LOAD_CLOSURE"})


def _read_names(inst: Inst) -> list[str]:
    if inst.opname in _READS:
        return [inst.arg]
    if inst.opname == "LOAD_FAST_LOAD_FAST":
        return list(inst.arg)
    if inst.opname == "STORE_FAST_LOAD_FAST":
        return [inst.arg[1]]
    return []


def live_locals(insts: list[Inst], start: int, candidates: set[str]) -> list[str]:
    """Locals among ``candidates`` that code reachable from ``start`` may read (a safe over-approximation).

    A resume function's stack arguments are never live: its prologue, the only code that reads
    them, runs before the body. (Counting them made a break in a resume function with a try block
    pass them again as live locals, under the names of its new resume function's stack arguments.)
    """
    seen: set[int] = set()
    pending = [start]
    read: set[str] = set()
    touches_try = False
    while pending:
        index = pending.pop()
        if index in seen or index >= len(insts):
            continue
        seen.add(index)
        inst = insts[index]
        touches_try |= inst.in_try
        read.update(_read_names(inst))
        if inst.target is not None:
            pending.append(inst.target)
        if inst.opname not in _STOPS:
            pending.append(index + 1)
    if touches_try:  # an exception handler may read anything
        read.update(name for inst in insts for name in _read_names(inst))
    return sorted(name for name in read & candidates if not name.startswith(_STACK_PREFIX))


def _origin_of(code: types.CodeType, index: int) -> tuple[types.CodeType, int]:
    """The code a resume code was made from, and the index there of instruction ``index`` of ``code``.

    A resume code is its original's body behind a longer prologue: resuming a resume function is
    resuming the original, so resume codes do not grow one prologue per break (nor differ per nesting).
    """
    if code in _origins:
        origin, indices = _origins[code]
        return origin, indices[index]
    return code, index


def passed_cells(code: types.CodeType) -> tuple[str, ...]:
    """The cell variables a resume code takes as its last arguments (before a raise-resume's exception): the
    frame's own cell objects, not values (see ``resume_code``)."""
    return code.co_cellvars if code in _origins else ()


def super_receiver(code: types.CodeType) -> str | None:
    """The argument a resume function of ``code`` must take first, or None.

    Python 3.11's zero-argument ``super()`` takes the frame's first local as its object (3.12's LOAD_SUPER_ATTR
    loads it by name): a resume function of a method calling it takes the method's first argument first.
    """
    origin = _origins.get(code, (code, 0))[0]
    if PY >= (3, 12) or "__class__" not in origin.co_freevars or "super" not in origin.co_names:
        return None
    if not origin.co_argcount or origin.co_varnames[0] in origin.co_cellvars:
        return None
    return origin.co_varnames[0]


def unrolled_too_far(code: types.CodeType, target: Inst, layout: tuple[Slot, ...], live: tuple[str, ...]) -> bool:
    """True when resuming at ``target`` with ``layout`` would compile more than MAX_LOOP_STEPS steps of a loop."""
    if not any(kind in _LOOP_STEPS for kind, _ in layout):
        return False
    shape = tuple(kind for kind, _ in layout)
    steps = _loop_steps.setdefault((*_origin_of(code, target.index), shape, live), set())
    if layout not in steps and len(steps) >= MAX_LOOP_STEPS:
        return True
    steps.add(layout)
    return False


def resume_code(
    code: types.CodeType,
    target: Inst,
    layout: tuple[Slot, ...],
    live: tuple[str, ...],
    *,
    raising: Region | None = None,
) -> tuple[str, types.CodeType]:
    """The name and code of the function that continues ``code`` at ``target`` with the stack ``layout``.

    With ``raising`` (the exception-table region a break instruction raised in; ``target`` is its
    handler), the function takes the exception as its last argument and raises it again inside a copy
    of that region: ``layout`` is then the stack the handler unwinds to.
    """
    code, target_index = _origin_of(code, target.index)
    if raising is not None:
        raising = Region(target_index, raising.depth, raising.push_lasti)  # its target is the handler
    key = (code, target_index, layout, live, raising)
    if key in _cache:
        return _cache[key]
    target = decode(code)[1][target_index]
    kind = "raising_at" if raising is not None else "at"
    name = f"__resume_{kind}_{target.offset}_{next(_resume_ids)}"
    bc = bytecode.Bytecode.from_code(code)
    set_region_depths(code, bc)
    entry = bytecode.Label()
    body: list[Any] = []
    prologue: list[Any] = []
    in_prefix = True
    prefix_length = 0
    index = 0
    lineno = target.lineno or code.co_firstlineno
    for item in bc:
        if isinstance(item, bytecode.Instr):
            if in_prefix:
                prologue.append(item)
                if item.name == "RESUME":
                    in_prefix = False
                    prefix_length = len(prologue)
                    prologue.extend(_push_stack(layout, lineno))
                    if raising is None:
                        prologue.append(bytecode.Instr("JUMP_FORWARD", entry, lineno=lineno))
                    else:
                        prologue.extend(_raise_in(entry, raising, lineno))
                index += 1
                continue
            if index == target_index:
                body.append(entry)
            index += 1
        body.append(item)
    stack_names = [f"{_STACK_PREFIX}{i}" for i, (kind, _) in enumerate(layout) if kind in TAKES_ARGUMENT]
    receiver = super_receiver(code)
    first = [receiver] if receiver else []
    exception = [EXCEPTION] if raising is not None else []
    argnames = [*first, *stack_names, *(name for name in live if name != receiver), *exception]
    if len(set(argnames)) != len(argnames):  # a repeated name would shift every later argument
        raise ValueError(f"resume function {name}: repeated argument names in {argnames}")
    # The frame's cells themselves come after the live locals: no MAKE_CELL wraps them in new cells, so a closure
    # made before the break (a `nonlocal` counter) and the resumed code share each one.
    argnames = [*argnames[: len(argnames) - len(exception)], *bc.cellvars, *exception]
    if len(set(argnames)) != len(argnames):
        raise ValueError(f"resume function {name}: cell variables passed twice in {argnames}")
    prologue = [i for i in prologue if not (isinstance(i, bytecode.Instr) and i.name == "MAKE_CELL")]
    # Each instruction's index in the original: the body's follow the original's, one to one but for the pairs
    # of locals split in two (the prologue's lie before the original's body: never a place to resume at).
    shift = sum(isinstance(i, bytecode.Instr) for i in prologue) - prefix_length
    indices = [i - shift for i in range(prefix_length + shift)]
    split_body: list[Any] = []
    original = prefix_length
    for item in body:
        parts = split_local_pairs(item)
        split_body.extend(parts)
        if isinstance(item, bytecode.Instr):
            indices.extend([original] * len(parts))
            original += 1
    new = bytecode.Bytecode([*prologue, *split_body])
    new._copy_attr_from(bc)
    new.argnames = argnames
    new.argcount = len(argnames)
    new.posonlyargcount = 0
    new.kwonlyargcount = 0
    new.flags = bc.flags & ~(0x04 | 0x08)  # no *args / **kwargs
    new.name = name
    new.qualname = name
    # The depths come from the original table: the prologue jumps into the middle of a region, past its
    # TryBegin, where the bytecode package's flow analysis would never reach it (and left it unset).
    # The flow analysis behind co_stacksize starts at the prologue and misses handlers reached only by an
    # exception from the prologue's raise; the original code's bound (plus the prologue's iterator
    # rebuilding: a NULL, the rebuilding function and its three arguments) holds for every instruction of the copy.
    bound = code.co_stacksize + 5
    try:
        made = new.to_code(compute_exception_stack_depths=False)
    except RuntimeError:
        # The analysis also walks blocks it never reached from the prologue as if they started empty: the code
        # after a `with` block that always raises, reached only through the handler that suppresses the raise.
        made = new.to_code(stacksize=bound, compute_exception_stack_depths=False)
    made = made.replace(co_stacksize=max(made.co_stacksize, bound))
    result = (name, made)
    _origins[result[1]] = (code, tuple(indices))
    _cache[key] = result
    return result


def set_region_depths(code: types.CodeType, bc: bytecode.Bytecode) -> None:
    """Give each TryBegin of ``bc`` (decoded from ``code``) the stack depth of its exception-table entry."""
    offsets = [i.offset for i in dis.get_instructions(code) if i.opname not in ("EXTENDED_ARG", "CACHE")]
    depths = {(e.start, e.target): e.depth for e in exception_entries(code)}
    label_offsets: dict[int, int] = {}
    begins: list[tuple[bytecode.TryBegin, int]] = []
    pending: list[Any] = []
    index = 0
    for item in bc:
        if isinstance(item, bytecode.Instr):
            for waiting in pending:
                if isinstance(waiting, bytecode.Label):
                    label_offsets[id(waiting)] = offsets[index]
                else:
                    begins.append((waiting, offsets[index]))
            pending.clear()
            index += 1
        elif isinstance(item, (bytecode.Label, bytecode.TryBegin)):
            pending.append(item)
    for begin, start in begins:
        key = (start, label_offsets.get(id(begin.target)))
        if key not in depths:
            unsupported(f"resuming {code.co_name}: no exception-table entry starts at offset {start}")
        begin.stack_depth = depths[key]


def _raise_in(handler: bytecode.Label, region: Region, lineno: int) -> list[Any]:
    """``raise exc`` inside a region whose handler is ``handler``, as the original region's."""
    begin = bytecode.TryBegin(handler, region.push_lasti, region.depth)
    return [
        begin,
        bytecode.Instr("LOAD_FAST", EXCEPTION, lineno=lineno),
        bytecode.Instr("RAISE_VARARGS", 1, lineno=lineno),
        bytecode.TryEnd(begin),
    ]


def _push_stack(layout: tuple[Slot, ...], lineno: int) -> list[bytecode.Instr]:
    out = []

    def emit(name: str, arg: Any = bytecode.UNSET) -> None:
        out.append(bytecode.Instr(name, arg, lineno=lineno))

    for i, (kind, count) in enumerate(layout):
        if kind == NULL:
            emit("PUSH_NULL")
            continue
        if kind == GRAD_EXIT:
            emit("LOAD_GLOBAL", (False, GRAD_EXIT_GLOBALS[bool(count)]))
            continue
        if kind == ENUMERATE:
            emit("LOAD_GLOBAL", (True, ENUMERATE_GLOBAL))
            emit("LOAD_FAST", f"{_STACK_PREFIX}{i}")
            emit("LOAD_CONST", count)
            if PY < (3, 12):
                emit("PRECALL", 2)
            emit("CALL", 2)
            continue
        if kind == LIST_ITER:
            emit("LOAD_GLOBAL", (True, LIST_ITERATOR_AT))
            emit("LOAD_FAST", f"{_STACK_PREFIX}{i}")
            emit("LOAD_CONST", count)
            emit("LOAD_CONST", False)
            if PY < (3, 12):
                emit("PRECALL", 3)
            emit("CALL", 3)
            continue
        emit("LOAD_FAST", f"{_STACK_PREFIX}{i}")
        if kind == ITER:
            emit("GET_ITER")
    return out
