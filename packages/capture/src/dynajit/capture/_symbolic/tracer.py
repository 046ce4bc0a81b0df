"""The symbolic interpreter: walks a code object's instructions over variable trackers.

:class:`Tracer` runs one frame; calls to user functions inline a child tracer
sharing the same :class:`OutputGraph`. The root tracer (the converted frame)
stops at a RETURN_VALUE, or before the instruction at which the previous
attempt could not continue (a graph break), leaving its stack and locals for
code generation.
"""

from __future__ import annotations

import inspect
import linecache
import sys
import traceback
import types
from typing import Any

import torch

from dynajit.capture._frame import Unsupported
from dynajit.capture._symbolic import marks
from dynajit.capture._symbolic import opcodes_build as _opcodes_build  # noqa: F401  (registers handlers)
from dynajit.capture._symbolic import opcodes_call as _opcodes_call  # noqa: F401
from dynajit.capture._symbolic import opcodes_control as _opcodes_control  # noqa: F401
from dynajit.capture._symbolic import opcodes_match as _opcodes_match  # noqa: F401
from dynajit.capture._symbolic import opcodes_ops as _opcodes_ops  # noqa: F401
from dynajit.capture._symbolic import opcodes_stack as _opcodes_stack  # noqa: F401
from dynajit.capture._symbolic.blocks import GRAD_EXITS
from dynajit.capture._symbolic.exceptions import OuterException, catch, handled_exception
from dynajit.capture._symbolic.generators import LazyGeneratorVar
from dynajit.capture._symbolic.instructions import PY, Inst, decode
from dynajit.capture._symbolic.nonstrict import call_nonstrict
from dynajit.capture._symbolic.output import OutputGraph
from dynajit.capture._symbolic.paths import (
    Attr,
    Closure,
    Global,
    Item,
    Local,
    PassedCell,
    Path,
    builtin_path,
    builtins_of,
)
from dynajit.capture._symbolic.registry import BREAKS, lookup
from dynajit.capture._symbolic.resume import passed_cells
from dynajit.capture._symbolic.variables import (
    VT,
    BoundMethodVar,
    CellVar,
    ConstVar,
    DictVar,
    ListVar,
    NNModuleVar,
    RaisesInPython,
    SetVar,
    TupleVar,
    UserFunctionVar,
    UserObjectVar,
    is_literal,
    raises_in_python,
    unsupported,
)
from dynajit.capture._symbolic.variables.contexts import _GradModeExit as GradModeExitVar
from dynajit.capture._symbolic.wrap import wrap_value

__all__ = ["BadCall", "RootTracer", "Tracer", "bind_arguments"]


class BadCall(RaisesInPython):
    """The arguments do not fit the callee: Python raises TypeError before the callee runs any code."""


GENERATOR_FLAGS = (
    inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE
)

_decoded: dict[types.CodeType, tuple[Any, list[Inst]]] = {}


def decoded(code: types.CodeType) -> tuple[Any, list[Inst]]:
    """Decode ``code`` once per process."""
    if code not in _decoded:
        _decoded[code] = decode(code)
    return _decoded[code]


class Tracer:
    """The interpreter state of one frame."""

    def __init__(
        self,
        code: types.CodeType,
        f_globals: dict[str, Any],
        output: OutputGraph,
        global_path: Any,
        parent: Tracer | None = None,
        self_value: Any = None,
    ) -> None:
        self.code = code
        self.insts = decoded(code)[1]
        self.f_globals = f_globals
        self.output = output
        self.global_path = global_path
        self.parent = parent
        self.depth: int = 0 if parent is None else parent.depth + 1
        self.locals: dict[str, VT] = {}
        self.cells: dict[str, CellVar] = {}
        self.stack: list[VT] = []
        self.ip = 0
        self.kw_names: tuple[str, ...] = ()
        self.version = PY
        self.done = False
        self.result: VT | None = None
        self.current: Inst | None = None
        self.self_value = self_value
        self.yielded: list[VT] | None = None  # values yielded, when this frame is an inlined generator
        # The exception being handled (sys.exc_info()): the root's is shared by every frame inlined into it.
        self.handled_exception: VT = OuterException()
        # The step at which the root frame left its normal flow by an exception (see exceptions.catch).
        self.exc_origin: int | None = None
        self.steps = 0

    # ----------------------------------------------------------------- stack

    def push(self, value: VT) -> None:
        self.stack.append(value)

    def pop(self) -> VT:
        return self.stack.pop()

    def popn(self, n: int) -> list[VT]:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    # ----------------------------------------------------------------- names

    def load_local(self, name: str) -> VT:
        if name in self.locals:
            value = self.locals[name]
            if isinstance(value, UnreadArgument):
                value = self.locals[name] = value.read(self)
            return value
        message = f"cannot access local variable {name!r} where it is not associated with a value"
        raises_in_python(f"{message} (UnboundLocalError)", UnboundLocalError(message))

    def load_global(self, name: str) -> VT:
        if self.global_path is Global:
            pending = self.output.side_effects.pending_global(name)
            if pending is not None:
                return pending
        if name in GRAD_EXITS and self.f_globals.get(name) is GRAD_EXITS[name]:
            # A resume function's prologue pushing the exit of the grad-mode block it resumes in.
            return GradModeExitVar(GRAD_EXITS[name].previous)
        if name in self.f_globals:
            return self.wrap(self.f_globals[name], self.global_path(name))
        return self._load_builtin(name)

    def _load_builtin(self, name: str) -> VT:
        """A name the globals lack, found in the module's builtins. The trace relies on both: a global of that
        name made later shadows the builtin, and so does a builtin replaced (``builtins.print = ...``)."""
        table = builtins_of(self.f_globals)
        if name not in table:
            unsupported(f"name {name!r} is not defined (NameError)")
        if self.global_path is Global:  # (read as Python reads it: the global if there is one, else the builtin)
            return self.wrap(table[name], Global(name))
        in_globals = self.global_path(name)
        if not isinstance(in_globals, Item) or "__builtins__" not in self.f_globals:
            return self.wrap(table[name], None)  # (the globals of a function no path reaches are not guarded)
        self.output.guard("dict_contains", in_globals.base, name, False)
        return self.wrap(table[name], builtin_path(in_globals.base, self.f_globals, name))

    def store_global(self, name: str, value: VT) -> None:
        if self.global_path is not Global:
            unsupported("writing a global of another module")
        self.output.side_effects.record_global_write(name, value)

    def wrap(self, value: Any, path: Path | None) -> VT:
        return wrap_value(self.output, value, path)

    def wrap_const(self, value: Any) -> VT:
        if type(value) is tuple:
            return TupleVar([self.wrap_const(v) for v in value])
        if type(value) is list:
            return ListVar([self.wrap_const(v) for v in value])
        if type(value) is set:
            return SetVar([ConstVar(v) for v in value])
        if type(value) is dict:
            return DictVar({k: self.wrap_const(v) for k, v in value.items()})
        return ConstVar(value)

    # ----------------------------------------------------------------- calls

    def call(self, fn: VT, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if fn.is_const() and not isinstance(fn, UserFunctionVar):  # (a user function asks its marks when called)
            handled = self.marked_call(fn.const(), args, kwargs)
            if handled is not None:
                return handled
        return fn.call(self, args, kwargs)

    def marked_call(self, target: Any, args: list[VT], kwargs: dict[str, VT]) -> VT | None:
        """The call of ``target`` as its marks (``disable``, ``allow_in_graph``, a substitute, ...) or its special
        meaning (``graph_break()``, ``is_compiling()``, ``sys.exception()``) make it; None when none applies.
        Every call of a known callable asks this first, however it is reached (bound, through a partial, by
        ``map``), so a mark holds wherever the function is called."""
        if target is marks.graph_break_function() and target is not None:
            unsupported("graph_break() was called")
        query = marks.is_compile_query(target)
        if query is not None:
            answer = self.output.ctx.export if query == "is_exporting" else True
            self.output.compile_only_answers |= answer  # see _convert: a trace that then raises
            return ConstVar(answer)
        if marks.is_disabled(target):
            how = "by torch with torch._disable_dynamo" if marks.is_torch_disabled(target) else "disable()"
            unsupported(f"{getattr(target, '__qualname__', target)} is marked {how}: it runs in Python")
        if marks.is_disabled_frame_only(target):
            name = getattr(target, "__qualname__", target)
            unsupported(f"{name} is marked disable(recursive=False): its frame runs in Python")
        if marks.is_disallowed_in_graph(target):
            unsupported(f"{getattr(target, '__qualname__', target)} is disallowed in the graph")
        substitute = marks.substitute_for(target)
        if substitute is not None:
            return self.wrap(substitute, None).call(self, args, kwargs)
        if marks.is_allowed_in_graph(target):
            return self.output.call_function(target, args, kwargs)
        if marks.has_constant_result(target):
            return self._constant_result(target, args, kwargs)
        if target is marks.nonstrict_trace_function() and target is not None and len(args) == 1:
            if not args[0].is_const():
                unsupported(f"nonstrict_trace() of {args[0]}, which is not known while tracing")
            target(args[0].const())  # the mark is global, as in eager code; the call returns its argument
            return args[0]
        if marks.is_nonstrict_traced(target):
            return call_nonstrict(self, target, args, kwargs)
        if target is sys.exception and not args and not kwargs:
            return handled_exception(self)
        if target is inspect.signature and len(args) == 1 and not kwargs:
            real = _real_callable(args[0])
            if real is not None:
                # The callable is guarded (by identity, or through its object), so its signature is fixed.
                return ConstVar(inspect.signature(real))
        return None

    def _constant_result(self, target: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
        """Call an ``assume_constant_result`` function now and bake its result in, unguarded."""
        name = getattr(target, "__qualname__", target)
        if not all(a.is_const() for a in [*args, *kwargs.values()]):
            unsupported(f"{name} is marked assume_constant_result but is called with non-constant arguments")
        result = target(*[a.const() for a in args], **{k: v.const() for k, v in kwargs.items()})
        if not is_literal(result):
            unsupported(f"{name} is marked assume_constant_result but returned a {type(result).__name__}")
        return self.wrap_const(result)

    def inline_call(self, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
        """Run a user function's code in a child tracer; its result is the call's value."""
        limit = config_value("inline_depth_limit", 24)
        if self.depth + 1 > limit:
            unsupported(f"inlining deeper than inline_depth_limit={limit}")
        code = fn.code
        is_generator = bool(code.co_flags & inspect.CO_GENERATOR)
        if code.co_flags & GENERATOR_FLAGS and not is_generator:
            unsupported(f"{code.co_name} is a coroutine or an async generator")
        defaults, kwdefaults = fn.defaults(self)
        bound = bind_arguments(code, args, kwargs, defaults, kwdefaults)
        f_globals, global_path = self._globals_of(fn)
        self_value = args[0].value if args and isinstance(args[0], UserObjectVar) else None
        child = Tracer(code, f_globals, self.output, global_path, parent=self, self_value=self_value)
        child.locals = bound
        for name, cell in zip(code.co_freevars, fn.closure_cells(self)):
            child.cells[name] = cell
        if is_generator:
            # Its body runs when the caller asks for items (see generators.py).
            return LazyGeneratorVar(child)
        result = child.run_inline()
        self.output.current_tx = self
        return result

    def _globals_of(self, fn: Any) -> tuple[dict[str, Any], Any]:
        if hasattr(fn, "f_globals"):
            return fn.f_globals, fn.global_path
        fn_globals = fn.value.__globals__
        root = self.root()
        if fn_globals is root.f_globals:
            return fn_globals, Global
        if fn.source is None:
            return fn_globals, lambda name: None
        base = fn.source
        return fn_globals, lambda name: Item(Attr(base, "__globals__"), name)

    def root(self) -> Tracer:
        tx: Tracer = self
        while tx.parent is not None:
            tx = tx.parent
        return tx

    # ----------------------------------------------------------------- control

    def jump(self, target: int | None) -> None:
        assert target is not None
        self.ip = target

    def do_return(self, value: VT) -> None:
        self.done = True
        self.result = value

    def step(self) -> None:
        inst = self.insts[self.ip]
        self.current = inst
        self.ip += 1
        self.output.current_tx = self
        run = lookup(inst.opname, self.version)
        if run is None:
            unsupported(BREAKS.get(inst.opname, f"instruction {inst.opname} is not supported"))
        try:
            run(self, inst)
        except RaisesInPython as exc:
            catch(self, inst, exc)  # continues at this frame's handler, or raises on to the caller's

    def run_inline(self) -> VT:
        while not self.done:
            self.step()
        assert self.result is not None
        return self.result

    # ----------------------------------------------------------------- metadata

    def user_stack(self) -> list[traceback.FrameSummary]:
        frames: list[traceback.FrameSummary] = []
        tx: Tracer | None = self
        while tx is not None:
            lineno = tx.current.lineno if tx.current is not None and tx.current.lineno else tx.code.co_firstlineno
            filename = tx.code.co_filename
            line = linecache.getline(filename, lineno).strip() or None
            frames.append(traceback.FrameSummary(filename, lineno, tx.code.co_name, line=line))
            tx = tx.parent
        return frames[::-1]

    def recaptured_meta(self) -> dict[str, Any] | None:
        """For a GraphModule's generated forward, the metadata of the original node on the current line."""
        gm = self.self_value
        if not isinstance(gm, torch.fx.GraphModule) or self.code is not getattr(type(gm).forward, "__code__", None):
            return None
        from dynajit.fxgraph import recapture_meta

        lineno = self.current.lineno if self.current is not None else None
        return recapture_meta(gm, lineno) if lineno else None


class RootTracer(Tracer):
    """The converted frame: stops at its return, or at the step where the graph must be cut."""

    def __init__(
        self, fn: types.FunctionType, args: tuple[Any, ...], output: OutputGraph, break_at: int | None
    ) -> None:
        super().__init__(fn.__code__, fn.__globals__, output, Global)
        code = fn.__code__
        n_args = code.co_argcount + code.co_kwonlyargcount
        n_args += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        passed = passed_cells(code)
        entry_modes = (torch.is_grad_enabled(), torch.is_inference_mode_enabled())
        for name, value in zip(code.co_varnames[:n_args], args):
            if name in passed:  # a resume function's argument that is its frame's cell itself
                self.cells[name] = output.cell_for(value, PassedCell(name))
                output.cell_paths.append((value, Local(name), None))
            elif _read_when_loaded(value) and not output.ctx.export:
                self.locals[name] = UnreadArgument(value, Local(name), entry_modes)
            else:
                self.locals[name] = self.wrap(value, Local(name))
        if args and isinstance(self.locals.get(code.co_varnames[0]), (UserObjectVar, NNModuleVar)):
            self.self_value = args[0]
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            # One tracker per real cell: a function reached from here that closes over the same cell (a
            # ``nonlocal`` counter beside this frame) must see this frame's writes, and this frame its.
            self.cells[name] = output.cell_for(cell, Closure(name))
            output.cell_paths.append((cell, None, None))
        self.break_at = break_at
        self.steps = 0
        self.stopped_at: Inst | None = None
        # The __exit__ of each with-block over a context manager written in Python, and the step entering it:
        # while the exit is on the stack, a graph break moves to that step (see _convert).
        self.python_with_exits: list[tuple[VT, int]] = []
        # Grad mode when the frame starts (guarded) and where tracing stopped: the transformed code sets
        # the latter after the graph runs (a break inside a grad-mode block, a resumed block left).
        self.grad_at_entry = torch.is_grad_enabled()
        self.grad_at_stop = self.grad_at_entry

    def run(self) -> None:
        try:
            while not self.done:
                if self.steps == self.break_at:
                    self.stopped_at = self.insts[self.ip]
                    self.current = self.stopped_at
                    return
                self.steps += 1
                self.step()
        except Unsupported:
            if self.exc_origin is not None:
                # A stop inside the handling of an exception raised by traced code (whose handlers run with
                # Python's exception state set): the graph is cut where the exception was raised instead.
                self.steps = self.exc_origin + 1
            raise
        finally:
            self.grad_at_stop = torch.is_grad_enabled()


class UnreadArgument(VT):
    """An argument of the converted frame the trace has not loaded yet: wrapped (its guards installed, a tensor
    made a graph input) when first loaded, so a frame that breaks before reading it is not guarded on it: a
    helper that prints first compiles once, whatever it is given, as TorchDynamo's lazy trackers make it. Left
    unread, it is passed on as the frame holds it."""

    def __init__(self, value: Any, source: Local, modes: tuple[bool, bool]) -> None:
        self.value = value
        self.source = source
        self.modes = modes  # grad and inference mode at the frame's entry

    def python_type(self) -> type:
        return type(self.value)

    def read(self, tx: Tracer) -> VT:
        """The argument wrapped in the grad and inference modes of the frame's entry, where every argument was
        wrapped before: its fake and its guards do not depend on the block the trace first loads it in."""
        grad, inference = self.modes
        with torch.inference_mode(inference), torch.set_grad_enabled(grad):
            return tx.wrap(self.value, self.source)


# Arguments read lazily: tensors and scalars, whose guards (a tensor's sizes and strides, an int's value) would
# recompile a frame that never reads them. An object is wrapped at once (``self`` decides how methods bind), and
# so is a tensor subclass (one with its own ``__torch_function__`` makes the whole frame run in Python).
_READ_WHEN_LOADED = frozenset({int, float, bool, complex, str, type(None), torch.Tensor, torch.nn.Parameter})


def _read_when_loaded(value: Any) -> bool:
    return type(value) in _READ_WHEN_LOADED


def config_value(name: str, default: Any) -> Any:
    """A field of ``dynajit.capture.config`` (the runtime's configuration), or ``default`` before it exists."""
    try:
        from dynajit.capture import config
    except ImportError:
        return default
    return getattr(config, name, default)


def bind_arguments(
    code: types.CodeType, args: list[VT], kwargs: dict[str, VT], defaults: list[VT], kwdefaults: dict[str, VT]
) -> dict[str, VT]:
    """Bind call arguments to ``code``'s parameters like CPython does; a bad call is left for Python to raise."""
    names = code.co_varnames
    n_pos = code.co_argcount
    n_kwonly = code.co_kwonlyargcount
    has_varargs = bool(code.co_flags & 0x04)
    has_varkw = bool(code.co_flags & 0x08)
    n_posonly = code.co_posonlyargcount
    bound: dict[str, VT] = {}
    for name, value in zip(names[:n_pos], args):
        bound[name] = value
    extra = args[n_pos:]
    if extra and not has_varargs:
        raise BadCall(f"{code.co_name}() takes {n_pos} positional arguments but {len(args)} were given (TypeError)")
    rest: dict[str, VT] = {}
    kwonly = names[n_pos : n_pos + n_kwonly]
    for key, value in kwargs.items():
        if key in names[n_posonly:n_pos] or key in kwonly:
            if key in bound:
                raise BadCall(f"{code.co_name}() got multiple values for argument {key!r} (TypeError)")
            bound[key] = value
        elif has_varkw:
            rest[key] = value
        else:
            raise BadCall(f"{code.co_name}() got an unexpected keyword argument {key!r} (TypeError)")
    first_default = n_pos - len(defaults)
    for i, name in enumerate(names[:n_pos]):
        if name not in bound:
            if i < first_default:
                raise BadCall(f"{code.co_name}() missing required argument {name!r} (TypeError)")
            bound[name] = defaults[i - first_default]
    for name in kwonly:
        if name not in bound:
            if name not in kwdefaults:
                raise BadCall(f"{code.co_name}() missing required keyword-only argument {name!r} (TypeError)")
            bound[name] = kwdefaults[name]
    index = n_pos + n_kwonly
    if has_varargs:
        bound[names[index]] = TupleVar(list(extra))
        index += 1
    if has_varkw:
        bound[names[index]] = DictVar(rest)
    return bound


def _real_callable(vt: VT) -> Any:
    """The Python callable a tracker stands for, when the interpreter holds it (None otherwise)."""
    # (const(): a signature holds the defaults' values, which a function guarded by its code has not guarded)
    if isinstance(vt, UserFunctionVar | NNModuleVar):
        return vt.const()
    if isinstance(vt, BoundMethodVar) and isinstance(vt.func, UserFunctionVar) and isinstance(vt.obj, UserObjectVar):
        return types.MethodType(vt.func.const(), vt.obj.value)
    return None
