"""The transformed code of a converted frame: at its return, or at a graph break.

Every form starts the same way: the frame-setup prefix, the call of the compiled
graph (its inputs loaded from their paths, its outputs kept in a local), and the
replay of side effects. Then:

- return: rebuild the returned value and return it;
- break on an instruction: rebuild the live locals and the stack, run the
  instruction itself in Python (a called function goes through the interceptor),
  and return what the resume function for the next instruction returns;
- break on a conditional jump over a tensor: test the real tensor and call the
  resume function of the branch taken.

Every value the rest needs (stack, live locals, cells) is rebuilt into a temporary
before side effects are replayed and locals written, since values are reached by
their paths from the frame's entry state. Inside a try/with block the break
instruction runs in a try region of its own whose handler raises the exception
again in the original block (``blocks.py``).
"""

from __future__ import annotations

import collections
import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import bytecode
import torch

from dynajit.capture._frame import CompiledGraph, Unsupported
from dynajit.capture._skipfiles import RESUME_MARK
from dynajit.capture._symbolic import marks
from dynajit.capture._symbolic.blocks import GRAD_EXIT_GLOBALS, GRAD_EXITS, Region, region_of
from dynajit.capture._symbolic.call_sites import INTERCEPT, frame_only_function
from dynajit.capture._symbolic.codegen import CodeGen, assemble, collect_tensors, prefix_of
from dynajit.capture._symbolic.generators import LazyGeneratorVar
from dynajit.capture._symbolic.instructions import PY, Inst
from dynajit.capture._symbolic.itertools_traced import PythonIteratorVar
from dynajit.capture._symbolic.output import OutputGraph
from dynajit.capture._symbolic.paths import Local, Path
from dynajit.capture._symbolic.resume import (
    ENUMERATE,
    ENUMERATE_GLOBAL,
    GRAD_EXIT,
    ITER,
    LIST_ITER,
    LIST_ITERATOR_AT,
    NULL,
    TAKES_ARGUMENT,
    VALUE,
    WATCHED,
    Slot,
    live_locals,
    resume_code,
    super_receiver,
    unrolled_too_far,
)
from dynajit.capture._symbolic.tracer import RootTracer, decoded
from dynajit.capture._symbolic.variables import VT, IteratorVar, NullVar, unsupported
from dynajit.capture._symbolic.variables.container_iterators import CheckedIteratorVar, watched
from dynajit.capture._symbolic.variables.contexts import _AutocastExit as AutocastExitVar
from dynajit.capture._symbolic.variables.contexts import _GradModeExit as GradModeExitVar
from dynajit.capture._symbolic.variables.item_iterators import list_iterator_at
from dynajit.capture._symbolic.variables.iterators import EnumerateVar, LazyIteratorVar, ReversedListIteratorVar
from dynajit.capture._symbolic.variables.tensor import end_data_replacements

__all__ = ["Transformed", "transform_break", "transform_branch", "transform_return"]

FRAME_ONLY = "__dynajit_frame_only"  # makes a disable(recursive=False) function with intercepted call sites


@dataclass
class Transformed:
    code: Any
    graphs: list[CompiledGraph] = field(default_factory=list)
    new_globals: dict[str, Any] = field(default_factory=dict)


def _pops_pushes(inst: Inst) -> tuple[int, int] | None:
    """Stack effect of the instructions a graph break can run on their own (None: not one of those)."""
    n = inst.arg if isinstance(inst.arg, int) else 0
    table: dict[str, Callable[[], tuple[int, int]]] = {
        "CALL": lambda: (n + 2, 1),
        "CALL_KW": lambda: (n + 3, 1),
        "CALL_FUNCTION_EX": lambda: (3 + (n & 1), 1),
        "BINARY_OP": lambda: (2, 1),
        "BINARY_SUBSCR": lambda: (2, 1),
        "BINARY_SLICE": lambda: (3, 1),
        "STORE_SUBSCR": lambda: (3, 0),
        "STORE_SLICE": lambda: (4, 0),
        "DELETE_SUBSCR": lambda: (2, 0),
        "STORE_ATTR": lambda: (2, 0),
        "STORE_GLOBAL": lambda: (1, 0),
        "LOAD_ATTR": lambda: (1, 1),
        "LOAD_METHOD": lambda: (1, 1),
        "COMPARE_OP": lambda: (2, 1),
        "CONTAINS_OP": lambda: (2, 1),
        "IS_OP": lambda: (2, 1),
        "UNARY_NEGATIVE": lambda: (1, 1),
        "UNARY_INVERT": lambda: (1, 1),
        "UNARY_NOT": lambda: (1, 1),
        "TO_BOOL": lambda: (1, 1),
        "GET_ITER": lambda: (1, 1),
        "CALL_INTRINSIC_1": lambda: (1, 1),
        "FORMAT_VALUE": lambda: (1 + bool(n & 4), 1),
        "FORMAT_SIMPLE": lambda: (1, 1),
        "FORMAT_WITH_SPEC": lambda: (2, 1),
        "CONVERT_VALUE": lambda: (1, 1),
        "BUILD_STRING": lambda: (n, 1),
        "UNPACK_SEQUENCE": lambda: (1, n),
        "UNPACK_EX": lambda: (1, (n & 0xFF) + (n >> 8) + 1),
        "RAISE_VARARGS": lambda: (n, 0),
        "BEFORE_WITH": lambda: (1, 2),  # a context manager the interpreter does not enter: entered in Python
    }
    entry = table.get(inst.opname)
    return entry() if entry is not None else None


class _FrameEmitter:
    """Shared steps of every transformed frame."""

    def __init__(self, tracer: RootTracer, output: OutputGraph, lineno: int | None) -> None:
        self.tracer = tracer
        self.output = output
        self.code = tracer.code
        self.result = Transformed(code=None)
        self.cg = CodeGen(self.code, self.result.new_globals, lineno)
        self.cg.layout_changed = frozenset(
            path
            for path, value, _ in output.inputs
            if isinstance(value, torch.Tensor) and output.changed_layout_of(value)
        )
        self.after_replay: list[tuple[str, VT]] = []

    def start(self, values: list[VT]) -> None:
        """Frame setup and the call of the graph; nothing of the frame's state is written yet."""
        bc = decoded(self.code)[0]
        self.cg.insts.extend(_copy(i) for i in prefix_of(bc))
        cells = self._own_cells()
        end_data_replacements(self.output)  # replayed after the graph: the outputs may describe those tensors
        needed = collect_tensors([*values, *self.output.side_effects.values(), *(c.contents for c in cells.values())])
        compiled = self.output.compile(needed)
        for path in self.output.versions_moved_on.values():
            self.cg.call_helper(torch.autograd.graph.increment_version, functools.partial(_emitted, path, self.cg))
            self.cg.emit("POP_TOP")
        if compiled is not None:
            name, graph = compiled
            self.result.graphs.append(graph)
            self.result.new_globals[name] = graph.compiled
            self.cg.outputs = {tv.node: i for i, tv in enumerate(needed)}
            self.cg.call_graph(name, [path for path, _, _ in self.output.inputs])
        if self.tracer.grad_at_stop != self.tracer.grad_at_entry or (
            compiled is not None and self.output.changes_grad_mode
        ):
            # The grad mode the traced code reached (inside a grad-mode block a break cut, or after leaving
            # a block a resume function started in): backends need not run the graph's grad-mode nodes, and a
            # graph may end in the mode its returned views were made in (a view made in an enable_grad block).
            mode = self.tracer.grad_at_stop

            def load_mode() -> int:
                self.cg.load_const(mode)
                return 1

            self.cg.call_helper(torch._C._set_grad_enabled, load_mode)
            self.cg.emit("POP_TOP")
        # Cells of this frame hold their traced contents for real (closures made while tracing share them).
        self.cg.cell_names = {id(cell): name for name, cell in self.tracer.cells.items()}

    def save(self, vt: VT) -> str | None:
        """Rebuild ``vt`` into a fresh temporary (None for a NULL slot, which holds nothing)."""
        if isinstance(vt, NullVar):
            return None
        name = self.cg.new_temp()
        if getattr(vt, "made_by_replay", False):
            # A value the replay of effects makes (the token of a traced ContextVar.set()) is rebuilt after
            # it, into the temporary named now; it depends on no path of the entry state.
            self.after_replay.append((name, vt))
            return name
        vt.reconstruct(self.cg)
        self.cg.emit("STORE_FAST", name)
        return name

    def commit(self, locals_: list[str]) -> None:
        """Write the traced state back to the frame: side effects, cells, and the live locals ``locals_``.

        Every value is rebuilt into a temporary first, and only then is anything written. A value's
        path is the state at the frame's entry: after ``residual = hidden_states`` then
        ``hidden_states = f(...)``, ``residual`` is reached as ``L['hidden_states']``, which must be
        read before ``hidden_states`` is stored (and an attribute before an effect rewrites it).
        """
        pending: dict[str, VT] = {}
        for name, cell in self._own_cells().items():
            unchanged = cell.contents.source == (cell.source or Local(name))  # (a resume function's cell: its path)
            if not unchanged:
                pending[name] = cell.contents
        for name in locals_:
            value = self.local_value(name)
            if name not in pending and (value.source != Local(name) or name in self.code.co_cellvars):
                pending[name] = value
        writes: dict[str, str | None] = {name: self.save(value) for name, value in pending.items()}
        self.output.side_effects.replay(self.cg)
        for deferred, value in self.after_replay:
            value.reconstruct(self.cg)
            self.cg.emit("STORE_FAST", deferred)
        self.after_replay.clear()
        for name, temp in writes.items():
            self.cg.emit("LOAD_FAST", temp)
            self.cg.store_local(name)

    def save_stack(self, stack: list[VT], layout: list[Slot]) -> list[str | None]:
        """Save the stack values a resume function takes back, in the slots of ``layout``."""
        temps: list[str | None] = []
        for vt, (kind, _) in zip(stack, layout):
            if kind == LIST_ITER:
                assert isinstance(vt, IteratorVar) and vt.over is not None
                temps.append(self.save(vt.over))
            elif kind == ENUMERATE:
                assert isinstance(vt, EnumerateVar)
                temps.append(self.save(vt.sources[0]))
            elif kind == ITER:
                assert isinstance(vt, IteratorVar)
                for item in vt.items[vt.position :]:
                    item.reconstruct(self.cg)
                self.cg.build("BUILD_TUPLE", len(vt.items) - vt.position)
                temps.append(self.cg.new_temp())
                self.cg.emit("STORE_FAST", temps[-1])
            elif kind in (VALUE, WATCHED):
                temps.append(self.save(vt))
            else:
                temps.append(None)
        return temps

    def load_saved(self, temps: list[str | None]) -> None:
        for temp in temps:
            if temp is not None:
                self.cg.emit("LOAD_FAST", temp)

    def _own_cells(self) -> dict[str, Any]:
        return {
            name: cell
            for name, cell in self.tracer.cells.items()
            if name in self.code.co_cellvars and cell.contents is not None
        }

    def finish(self) -> Transformed:
        self.result.code = assemble(decoded(self.code)[0], self.cg.insts)
        return self.result

    def push_resume(
        self, target: Inst, layout: tuple[Slot, ...], live: list[str], raising: Region | None = None
    ) -> tuple[int, Callable[[], int]]:
        """Push the (intercepted) resume function at ``target``, the NULL a call needs with it, and the argument
        it takes before the stack (see ``super_receiver``). Returns how many arguments were pushed, and what
        loads those after the stack (the live locals, then the frame's cells; see ``resume_code``), which
        returns how many it loaded.

        A raise-resume function (``raising``) runs in Python with its call sites intercepted: it only
        raises into the original handler, which the interpreter does not trace.
        """
        self._push_resume_function(target, layout, live, raising)
        receiver = super_receiver(self.code)
        if receiver is not None:
            self.cg.load_local(receiver)
        rest = [name for name in live if name != receiver]

        def load_after_stack() -> int:
            for name in rest:
                self.cg.load_local(name)
            for name in self.code.co_cellvars:
                self.cg.load_cell(name)
            return len(rest) + len(self.code.co_cellvars)

        return int(receiver is not None), load_after_stack

    def _push_resume_function(
        self, target: Inst, layout: tuple[Slot, ...], live: list[str], raising: Region | None
    ) -> None:
        name, code = resume_code(self.code, target, layout, tuple(live), raising=raising)
        if any(kind == LIST_ITER for kind, _ in layout):
            self.result.new_globals[LIST_ITERATOR_AT] = list_iterator_at
        if any(kind == ENUMERATE for kind, _ in layout):
            self.result.new_globals[ENUMERATE_GLOBAL] = enumerate
        for kind, count in layout:
            if kind == GRAD_EXIT:
                self.result.new_globals[GRAD_EXIT_GLOBALS[bool(count)]] = GRAD_EXITS[GRAD_EXIT_GLOBALS[bool(count)]]
        intercept = self.output.ctx.intercept
        if raising is not None or unrolled_too_far(self.code, target, layout, tuple(live)):
            intercept = functools.partial(frame_only_function, intercept=intercept)
        if not code.co_freevars:
            if name not in self.result.new_globals:
                fn = types.FunctionType(code, self.tracer.f_globals, name)
                fn.__dict__[RESUME_MARK] = True
                self.result.new_globals[name] = intercept(fn)
            self.cg.push_callable_global(name)
            return
        # A closure: the function is made at run time over this frame's own cells.
        maker = _ResumeMaker(code, self.tracer.f_globals, intercept)

        def args() -> int:
            for free in code.co_freevars:
                self.cg.load_cell(free)
            self.cg.build("BUILD_TUPLE", len(code.co_freevars))
            return 1

        self.cg.call_helper(maker, args)
        self.cg.push_null()
        if PY < (3, 13):  # [fn, NULL] -> [NULL, fn], the order of 3.11 and 3.12
            self.cg.emit("SWAP", 2)

    def call_resume(self, target: Inst, layout: tuple[Slot, ...], saved: list[str | None], live: list[str]) -> None:
        """Call the resume function at ``target`` with the saved stack and the live locals; return its result."""
        first, load_after_stack = self.push_resume(target, layout, live)
        self.load_saved(saved)
        after = load_after_stack()
        self.cg.call(first + sum(kind in TAKES_ARGUMENT for kind, _ in layout) + after)
        self.cg.emit("RETURN_VALUE")

    def kept(self, live: list[str]) -> list[VT]:
        """What the rest of the frame keeps besides its stack: the ``live`` locals, the cells, written objects."""
        cells = [cell.contents for cell in self._own_cells().values()]
        return [*(self.local_value(name) for name in live), *self.output.side_effects.values(), *cells]

    def local_value(self, name: str) -> VT:
        """The traced value of a local or of a cell variable of the frame."""
        if name in self.tracer.locals:
            return self.tracer.locals[name]
        return self.tracer.cells[name].get(self.tracer)

    def live_at(self, index: int) -> list[str]:
        """The locals a resume function at ``index`` takes by value (the frame's cells it takes as they are)."""
        return live_locals(self.tracer.insts, index, set(self.tracer.locals) - set(self.code.co_cellvars))


def _references(roots: list[VT]) -> collections.Counter[int]:
    """How many times each value is reached from ``roots`` (each root once, each object's children once)."""
    counts: collections.Counter[int] = collections.Counter()
    pending, expanded = list(roots), set()
    while pending:
        vt = pending.pop()
        if vt is None:
            continue
        counts[id(vt)] += 1
        if id(vt) not in expanded:
            expanded.add(id(vt))
            pending.extend(vt.children())
    return counts


def stack_layout(stack: list[VT], others: list[VT] = ()) -> list[Slot]:
    """How a resume function takes each stack value back (see ``resume.py``); refuses what it cannot.

    ``others``: what else the rest of the frame keeps (live locals, cells, written objects). A loop's iterator
    reached from those, or an iterator a ``zip``/``enumerate`` takes from, that the frame also holds, is one
    object Python advances wherever it is used: it is rebuilt once and passed as itself, never as its items.
    """
    counts = _references([*stack, *others])
    layout: list[Slot] = []
    for vt in stack:
        if counts[id(vt)] > 1 and isinstance(vt, IteratorVar) and not isinstance(vt, CheckedIteratorVar):
            layout.append((VALUE, 0))
        elif isinstance(vt, NullVar):
            layout.append((NULL, 0))
        elif isinstance(vt, GradModeExitVar):
            layout.append((GRAD_EXIT, int(vt.previous)))
        elif isinstance(vt, AutocastExitVar):
            unsupported("a graph break inside an autocast block cannot be resumed")
        elif isinstance(vt, LazyGeneratorVar):
            unsupported("a graph break inside a loop over a generator cannot be resumed")
        elif isinstance(vt, PythonIteratorVar):
            unsupported("a graph break inside a loop over an itertools iterator cannot be resumed")
        elif isinstance(vt, EnumerateVar) and not vt.settled and watched(vt.sources[0]):
            layout.append((ENUMERATE, vt.count))  # traced again over the WatchedIteration
        elif isinstance(vt, LazyIteratorVar) and not vt.settle(lambda source: counts[id(source)] > 1):
            layout.append((VALUE, 0))  # rebuilt as the same builtin over its rebuilt sources
        elif isinstance(vt, CheckedIteratorVar):
            layout.append((WATCHED, vt.position) if watched(vt) else (VALUE, 0))
        elif isinstance(vt, ReversedListIteratorVar):
            layout.append((VALUE, 0))  # Python's own, at its index
        elif isinstance(vt, IteratorVar) and vt.over is not None and not vt.exhausted:
            layout.append((LIST_ITER, vt.position))
        elif isinstance(vt, IteratorVar) and vt.over is not None:
            layout.append((ITER, 0))  # exhausted: it no longer holds its list
        elif isinstance(vt, IteratorVar):
            layout.append((ITER, len(vt.items) - vt.position))
        else:
            layout.append((VALUE, 0))
    return layout


class _ResumeMaker:
    """Makes the resume function of a closure over the running frame's cells (once per set of cells)."""

    def __init__(self, code: types.CodeType, f_globals: dict[str, Any], intercept: Callable[[Any], Any]) -> None:
        self.code = code
        self.f_globals = f_globals
        self.intercept = intercept
        self._made: dict[tuple[int, ...], tuple[tuple[Any, ...], Any]] = {}

    _KEEP = 8  # functions kept for the most recent sets of cells (closures made per call come and go)

    def __call__(self, cells: tuple[Any, ...]) -> Any:
        key = tuple(map(id, cells))
        if key not in self._made:
            fn = types.FunctionType(self.code, self.f_globals, self.code.co_name, None, cells)
            fn.__dict__[RESUME_MARK] = True
            self._made[key] = (cells, self.intercept(fn))
            if len(self._made) > self._KEEP:
                del self._made[next(iter(self._made))]
        return self._made[key][1]


def _copy(inst: bytecode.Instr) -> bytecode.Instr:
    return bytecode.Instr(inst.name, inst.arg, location=inst.location)


class _Protected:
    """The break instruction's protection inside a try/with block (see ``blocks.py``).

    ``enter`` opens a region of the transformed code around the instruction (at an empty stack);
    ``handle`` emits its handler: the exception goes to a raise-resume function, which raises it
    again inside the original region, so the code's own handler runs.
    """

    def __init__(self, emitter: _FrameEmitter, inst: Inst) -> None:
        self.emitter = emitter
        self.region = region_of(emitter.code, emitter.tracer.insts, inst)
        if inst.in_try and self.region is None:
            unsupported("a graph break in a try/with block whose exception-table entry is not found")
        # the locals the handler's raise-resume function takes (the instruction may raise into it)
        self.live = emitter.live_at(self.region.handler) if self.region is not None else []
        self.handler = bytecode.Label()
        self.begin: bytecode.TryBegin | None = None

    def enter(self) -> None:
        if self.region is not None:
            self.begin = bytecode.TryBegin(self.handler, False, 0)
            self.emitter.cg.insts.append(self.begin)

    def leave(self) -> None:
        if self.begin is not None:
            self.emitter.cg.insts.append(bytecode.TryEnd(self.begin))

    def check(self, layout: list[Slot]) -> None:
        if self.region is not None and self.region.depth > len(layout):
            unsupported("a graph break with less on the stack than its try/with block's handler expects")

    def handle(self, layout: list[Slot], saved: list[str | None]) -> None:
        region = self.region
        if region is None:
            return
        emitter, cg = self.emitter, self.emitter.cg
        cg.label(self.handler)
        exc = cg.new_temp()
        cg.emit("STORE_FAST", exc)
        outer = tuple(layout[: region.depth])
        first, load_after_stack = emitter.push_resume(
            emitter.tracer.insts[region.handler], outer, self.live, raising=region
        )
        emitter.load_saved(saved[: region.depth])
        after = load_after_stack()
        cg.emit("LOAD_FAST", exc)
        cg.call(first + sum(kind in TAKES_ARGUMENT for kind, _ in outer) + after + 1)
        cg.emit("RETURN_VALUE")


def transform_return(tracer: RootTracer, output: OutputGraph) -> Transformed:
    """The frame ran to its return: call the graph, replay effects, return the rebuilt value."""
    assert tracer.result is not None
    emitter = _FrameEmitter(tracer, output, tracer.current.lineno if tracer.current else None)
    emitter.start([tracer.result])
    result = emitter.save(tracer.result)
    emitter.commit([])
    emitter.load_saved([result])
    emitter.cg.emit("RETURN_VALUE")
    return emitter.finish()


def transform_break(tracer: RootTracer, output: OutputGraph, *, intercept_call: bool = True) -> Transformed:
    """Cut the graph before ``tracer.stopped_at``; run that instruction in Python; resume after it.

    A called function goes through the interceptor, except when ``intercept_call`` is false (the
    arguments do not fit it, so the call raises before any of its code runs).
    """
    inst = tracer.stopped_at
    assert inst is not None
    effect = _pops_pushes(inst)
    if effect is None:
        unsupported(f"a graph break at {inst.opname} cannot be resumed")
    pops, pushes = effect
    stack = tracer.stack
    if pops > len(stack):
        unsupported(f"{inst.opname} consumes more than the traced stack")
    below, consumed = stack[: len(stack) - pops], stack[len(stack) - pops :]
    emitter = _FrameEmitter(tracer, output, inst.lineno)
    protected = _Protected(emitter, inst)
    # (stored for the continuation and for the handler the instruction may raise into, which reads its own)
    live = sorted({*emitter.live_at(inst.index + 1), *protected.live})
    layout = stack_layout(below, [*consumed, *emitter.kept(live)])
    protected.check(layout)
    emitter.start([*stack, *(emitter.local_value(name) for name in live)])
    cg = emitter.cg
    saved_below = emitter.save_stack(below, layout)
    saved_consumed = _save_consumed(emitter, inst, consumed, intercept_call)
    emitter.commit(live)
    pushed: list[Slot] = [(VALUE, 0)] * pushes
    if inst.method:  # the NULL of a method load is pushed again by the resume function
        pushed = pushed[:-1] + ([(VALUE, 0), (NULL, 0)] if PY >= (3, 13) else [(NULL, 0), (VALUE, 0)])
    layout_after = (*layout, *pushed)
    protected.enter()
    if inst.opname in _TERMINAL:  # nothing runs after it: no resume function
        _load_consumed(emitter, saved_consumed)
        _emit_instruction(emitter, inst)
        protected.leave()
    else:
        first, load_after_stack = emitter.push_resume(tracer.insts[inst.index + 1], layout_after, live)
        emitter.load_saved(saved_below)
        _load_consumed(emitter, saved_consumed)
        _emit_instruction(emitter, inst)
        protected.leave()
        after = load_after_stack()
        cg.call(first + sum(kind in TAKES_ARGUMENT for kind, _ in layout_after) + after)
        cg.emit("RETURN_VALUE")
    protected.handle(layout, saved_below)
    return emitter.finish()


_TERMINAL = frozenset({"RAISE_VARARGS"})


def _save_consumed(emitter: _FrameEmitter, inst: Inst, consumed: list[VT], intercept_call: bool) -> list[str | None]:
    """Save the operands of the break instruction, the called function passed through the interceptor."""
    cg = emitter.cg
    callable_slot = None
    if intercept_call and inst.opname in ("CALL", "CALL_KW", "CALL_FUNCTION_EX"):
        callable_slot = 1 if PY < (3, 13) and isinstance(consumed[0], NullVar) else 0
    saved: list[str | None] = []
    for i, vt in enumerate(consumed):
        if i == callable_slot and not _runs_unintercepted(vt):
            intercept = emitter.output.ctx.intercept
            value: Callable[[Any], Any]
            if _const_target(vt) is not None and marks.is_disabled_frame_only(_const_target(vt)):
                helper, value = FRAME_ONLY, functools.partial(frame_only_function, intercept=intercept)
            else:
                helper, value = INTERCEPT, intercept
            emitter.result.new_globals[helper] = value
            cg.push_callable_global(helper)
            vt.reconstruct(cg)
            cg.call(1)
            saved.append(cg.new_temp())
            cg.emit("STORE_FAST", saved[-1])
        else:
            saved.append(emitter.save(vt))
    return saved


def _load_consumed(emitter: _FrameEmitter, saved: list[str | None]) -> None:
    for temp in saved:
        if temp is None:  # a NULL slot
            emitter.cg.push_null()
        else:
            emitter.cg.emit("LOAD_FAST", temp)


def _const_target(vt: VT) -> Any:
    if not vt.is_const():
        return None
    try:
        return vt.const()
    except Unsupported:
        return None


def _runs_unintercepted(vt: VT) -> bool:
    target = _const_target(vt)
    if target is None:
        return False
    return marks.is_disabled(target) or target is marks.graph_break_function()


def _emit_instruction(emitter: _FrameEmitter, inst: Inst) -> None:
    cg = emitter.cg
    if inst.opname == "CALL" and emitter.tracer.kw_names:
        cg.emit("KW_NAMES", emitter.tracer.kw_names)
    if inst.opname == "CALL" and PY < (3, 12):
        cg.emit("PRECALL", inst.arg)
    if inst.opname in ("LOAD_ATTR", "LOAD_METHOD"):
        cg.load_attr(inst.arg)
        return
    raw = inst.raw
    cg.insts.append(bytecode.Instr(raw.name, raw.arg, location=raw.location))


def transform_branch(tracer: RootTracer, output: OutputGraph) -> Transformed:
    """Cut the graph at a conditional jump on a tensor: test the real tensor, resume in the branch taken."""
    inst = tracer.stopped_at
    assert inst is not None
    jump_if_true = "TRUE" in inst.opname
    keeps_on_jump = inst.opname.startswith("JUMP_IF_")
    stack = tracer.stack
    assert inst.target is not None
    jumped = tracer.insts[inst.target]
    fallthrough = tracer.insts[inst.index + 1]
    emitter = _FrameEmitter(tracer, output, inst.lineno)
    protected = _Protected(emitter, inst)
    live = {"jump": emitter.live_at(jumped.index), "fall": emitter.live_at(fallthrough.index)}
    every_live = sorted({*live["jump"], *live["fall"]})
    layout = stack_layout(stack, emitter.kept(every_live))
    protected.check(layout[:-1])
    emitter.start([*stack, *(emitter.local_value(n) for n in every_live)])
    cg = emitter.cg
    saved = emitter.save_stack(stack, layout)
    emitter.commit(every_live)
    protected.enter()  # converting the tensor to bool may raise
    emitter.load_saved(saved[-1:])
    if PY >= (3, 13):
        cg.emit("TO_BOOL")
    taken = bytecode.Label()
    jump_name = "POP_JUMP_IF_TRUE" if jump_if_true else "POP_JUMP_IF_FALSE"
    if PY < (3, 12):
        jump_name = jump_name.replace("POP_JUMP_IF", "POP_JUMP_FORWARD_IF")
    cg.emit(jump_name, taken)
    protected.leave()
    emitter.call_resume(fallthrough, tuple(layout[:-1]), saved[:-1], live["fall"])
    cg.label(taken)
    jump_stack = len(stack) if keeps_on_jump else len(stack) - 1
    emitter.call_resume(jumped, tuple(layout[:jump_stack]), saved[:jump_stack], live["jump"])
    protected.handle(layout[:-1], saved[:-1])
    return emitter.finish()


def _emitted(path: Path, cg: CodeGen) -> int:
    """Emit the value at ``path``, one argument of a helper call."""
    path.emit(cg)
    return 1
