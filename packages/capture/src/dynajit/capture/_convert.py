"""Frame conversion: trace a frame symbolically, compile its graph, and generate the transformed code.

``convert_frame`` traces the frame with a :class:`RootTracer`. If tracing stops
on something it cannot trace, it records the graph break and traces again,
stopping just before that step (tracing is deterministic, so the state there is
the same); the transformed code then runs that step in Python and continues in
a resume function. Under ``fullgraph`` or ``export`` a break is an error.
"""

from __future__ import annotations

import contextlib
import dis
import io
import types
from collections.abc import Iterator
from typing import Any

import torch

from dynajit.capture._frame import ConvertedFrame, FrameContext, GraphBreak, SkipFrame, Unsupported
from dynajit.capture._symbolic import marks
from dynajit.capture._symbolic.call_sites import INTERCEPT, intercept_call_sites
from dynajit.capture._symbolic.export import export_graph
from dynajit.capture._symbolic.guarding import build_guards
from dynajit.capture._symbolic.opcodes_control import TensorBranch
from dynajit.capture._symbolic.output import OutputGraph
from dynajit.capture._symbolic.tracer import GENERATOR_FLAGS, BadCall, RootTracer
from dynajit.capture._symbolic.transform import Transformed, transform_branch, transform_break, transform_return
from dynajit.capture._symbolic.variables import RaisesInPython
from dynajit.fxgraph import artifact_enabled, artifact_logger

__all__ = ["convert_frame"]


def convert_frame(fn: types.FunctionType, args: tuple[Any, ...], ctx: FrameContext) -> ConvertedFrame:
    """Convert one call of ``fn`` (its argument values in ``co_varnames`` order) into guarded, compiled code."""
    with _saved_tensor_hooks_deferred():
        return _convert_frame(fn, args, ctx)


@contextlib.contextmanager
def _saved_tensor_hooks_deferred() -> Iterator[None]:
    """Keep the user's saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``) out of tracing.

    Fake-tensor propagation and the backend's own tracing (AOT autograd's joint graph) save tensors for
    backward; with the hooks active each save would call the user's ``pack`` on a fake tensor, calls eager
    never makes. torch's tracing flag stops the default hooks being applied (AOT autograd still sees them,
    reading them explicitly); the compiled code runs with the hooks, as eager does.
    """
    prior = torch._C._autograd._saved_tensors_hooks_set_tracing(True)
    try:
        yield
    finally:
        torch._C._autograd._saved_tensors_hooks_set_tracing(prior)


# Recurrent modules run as Python, inside a graph or compiled directly: their fused kernels leave
# outputs undefined that AOT autograd would have to save for backward.
_RNN_FORWARDS = {
    cls.forward.__code__ for cls in (torch.nn.RNNBase, torch.nn.RNN, torch.nn.LSTM, torch.nn.GRU)
}  # fmt: skip


_FORWARD_AD = "forward-mode AD is on (inside forward_ad.dual_level()) and a compiled graph carries no tangents"


def _forward_ad_in_python(ctx: FrameContext) -> None:
    """Raise what runs the frame in Python while a dual level is entered (an error under fullgraph): kernels compute
    primal values only, so a dual tensor's tangent would be dropped without a word. The skip holds for this
    level only (GLOBAL_STATE reads it), so the frame compiles again once the level is left."""
    if ctx.fullgraph:
        raise Unsupported(f"{_FORWARD_AD}: call it outside the dual level, or without fullgraph to run it in Python")
    raise SkipFrame(
        f"{_FORWARD_AD}: the frame runs in Python, where dual tensors carry theirs", build_guards(None, ctx)
    )


def _convert_frame(fn: types.FunctionType, args: tuple[Any, ...], ctx: FrameContext) -> ConvertedFrame:
    attempts: list[OutputGraph] = []
    try:
        return _trace_and_transform(fn, args, ctx, attempts)
    finally:
        for output in attempts:
            output.release()


def _trace_and_transform(
    fn: types.FunctionType, args: tuple[Any, ...], ctx: FrameContext, attempts: list[OutputGraph]
) -> ConvertedFrame:
    code = fn.__code__
    if code.co_flags & GENERATOR_FLAGS:
        raise SkipFrame(f"{code.co_name} is a generator or coroutine; it runs in Python")
    if marks.is_disabled_frame_only(fn):
        return _frame_only(fn, ctx)
    if torch.autograd.forward_ad._current_level >= 0 and not ctx.export:
        _forward_ad_in_python(ctx)
    if args and issubclass(type(args[0]), torch.nn.RNNBase) and code in _RNN_FORWARDS:
        raise SkipFrame(f"{type(args[0]).__name__}.forward runs eagerly (a fused recurrent kernel per call)")
    break_at: int | None = None
    graph_break: GraphBreak | None = None
    at_branch = False
    bad_call = False
    grad_mode = torch.is_grad_enabled()
    while True:
        output = OutputGraph(ctx)
        attempts.append(output)
        try:
            tracer = RootTracer(fn, args, output, break_at)
        except Unsupported as exc:  # an argument that cannot be traced (guarded as far as it was read)
            if ctx.export or ctx.fullgraph:
                raise
            return _calls_intercepted(fn, ctx, GraphBreak(exc.reason, ()), output)
        try:
            tracer.run()
            break
        except Unsupported as exc:
            innermost = output.current_tx or tracer
            stack = innermost.user_stack()
            # A step that raises anyway runs in Python even under fullgraph, so the error is eager's own.
            raises = isinstance(exc, RaisesInPython)
            if ctx.export or (ctx.fullgraph and not raises):
                raise Unsupported(exc.reason, user_stack=stack) from None
            if raises and output.compile_only_answers and not ctx.fullgraph:
                # The raise may follow from `is_compiling()` being True (a mask built only in eager is None):
                # the frame runs in Python, where it is False, as a frame whose trace raises runs in TorchDynamo.
                reason = f"the trace raises after asking whether it is compiling ({exc.reason})"
                return _calls_intercepted(fn, ctx, GraphBreak(reason, tuple(stack)))
            if break_at is not None:
                reason = f"tracing is not repeatable up to the graph break ({exc.reason})"
                return _calls_intercepted(fn, ctx, GraphBreak(reason, tuple(stack)))
            break_at = tracer.steps - 1
            at_branch = isinstance(exc, TensorBranch) and innermost is tracer
            bad_call = isinstance(exc, BadCall) and innermost is tracer
            graph_break = GraphBreak(exc.reason, tuple(stack))
            entered = [
                step for exit_method, step in tracer.python_with_exits if any(v is exit_method for v in tracer.stack)
            ]
            if entered:
                # Inside a with-block over a context manager written in Python, whose __exit__ resumed code
                # cannot hold: the with statement runs in Python, and the code after it resumes inside the block.
                break_at, at_branch, bad_call = entered[-1], False, False
                reason = f"a with-block over a context manager written in Python holds a graph break ({exc.reason})"
                graph_break = GraphBreak(reason, tuple(stack))
            _log_break(graph_break)
        finally:
            output.leave_entered()  # an autocast block tracing stopped inside
            torch._C._set_grad_enabled(grad_mode)  # a grad-mode block entered while tracing
    if graph_break is None and not output.has_ops():
        guards = build_guards(output, ctx) if ctx.export else None
        if not ctx.export:
            raise SkipFrame(f"{code.co_name} has no tensor operations", guards)
    try:
        if graph_break is None:
            transformed = transform_return(tracer, output)
        elif at_branch:
            transformed = transform_branch(tracer, output)
        else:
            transformed = transform_break(tracer, output, intercept_call=not bad_call)
    except Unsupported as exc:
        if graph_break is None:  # the value returned cannot be rebuilt in Python: the frame runs there instead
            if ctx.export or ctx.fullgraph:
                raise Unsupported(exc.reason) from None
            return _calls_intercepted(fn, ctx, GraphBreak(exc.reason, ()))
        return _calls_intercepted(fn, ctx, GraphBreak(f"{exc.reason} ({graph_break.reason})", graph_break.user_stack))
    # Under fullgraph the only stop is a step that raises: execution never continues, so it is not a break.
    converted = _converted(fn, ctx, output, transformed, None if ctx.fullgraph else graph_break)
    if ctx.export:
        converted.export_graph_module = export_graph(fn, tracer, output, transformed, ctx.export_bound)
    return converted


def _converted(
    fn: types.FunctionType, ctx: FrameContext, output: OutputGraph, transformed: Transformed, brk: GraphBreak | None
) -> ConvertedFrame:
    if artifact_enabled("bytecode"):
        artifact_logger("bytecode").info(
            "ORIGINAL BYTECODE %s %s line %d\n%s\nMODIFIED BYTECODE %s %s line %d\n%s",
            fn.__code__.co_name, fn.__code__.co_filename, fn.__code__.co_firstlineno, _dis(fn.__code__),
            fn.__code__.co_name, fn.__code__.co_filename, fn.__code__.co_firstlineno, _dis(transformed.code),
        )  # fmt: skip
    return ConvertedFrame(
        original_code=fn.__code__,
        code=transformed.code,
        guards=build_guards(output, ctx),
        graphs=transformed.graphs,
        graph_breaks=[brk] if brk is not None else [],
        new_globals=transformed.new_globals,
    )


def _frame_only(fn: types.FunctionType, ctx: FrameContext) -> ConvertedFrame:
    """``disable(fn, recursive=False)``: fn's own code, run in Python, with its call sites intercepted."""
    if ctx.export:
        raise Unsupported(f"{fn.__qualname__} is marked disable(recursive=False): its frame cannot be exported")
    return _calls_intercepted(fn, ctx, None)


def _calls_intercepted(
    fn: types.FunctionType, ctx: FrameContext, brk: GraphBreak | None, output: OutputGraph | None = None
) -> ConvertedFrame:
    """fn's own code in Python with every call site intercepted, so the functions it calls are still compiled.

    The fallback for a graph break that cannot be resumed (inside a try/with block, ...): the frame itself
    runs eagerly, its callees do not. Valid for every input, so only the global guards apply, and those of
    ``output`` when given (an argument that cannot be traced, guarded by its type: others are traced).
    """
    if brk is not None:
        _log_break(brk)
    return ConvertedFrame(
        original_code=fn.__code__,
        code=intercept_call_sites(fn.__code__),
        guards=build_guards(output or OutputGraph(ctx), ctx),
        graphs=[],
        graph_breaks=[brk] if brk is not None else [],
        new_globals={INTERCEPT: ctx.intercept},
    )


def _dis(code: types.CodeType) -> str:
    out = io.StringIO()
    dis.dis(code, file=out, depth=0)
    return out.getvalue()


def _log_break(brk: GraphBreak) -> None:
    if artifact_enabled("graph_breaks"):
        where = brk.user_stack[-1] if brk.user_stack else None
        line = f"\n    {where.line}" if where is not None and where.line else ""
        artifact_logger("graph_breaks").info("Graph break: %s at %s%s", brk.reason, brk.location, line)
