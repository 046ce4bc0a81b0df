"""Exceptions raised and caught inside traced code: the zero-cost exception tables of CPython 3.11+.

When a step raises an exception whose class and arguments are known (a
``raise`` of an exception made from constants, a missing dict key, a missing
attribute, an exhausted iterator), the interpreter does what CPython does: it
looks the raising instruction up in the frame's exception table, unwinds the
value stack to the entry's depth (pushing the instruction's offset when the
entry asks for ``lasti``), pushes the exception and continues at the handler.
A frame without a covering entry passes the exception to its caller's
instruction (an inlined call), and the root frame without one stops tracing
there: the graph is cut and Python raises the exception itself, as before.

The handled exception (what ``sys.exc_info()`` and a bare ``raise`` see) is
kept on the root tracer. At the root frame's entry it is whatever Python was
handling when the frame was called, which tracing does not know:
:class:`OuterException` stands for it and rebuilds it at run time.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from dynajit.capture._symbolic.blocks import region_of
from dynajit.capture._symbolic.registry import handler
from dynajit.capture._symbolic.variables import (
    VT,
    ConstVar,
    ExceptionVar,
    RaisesInPython,
    TupleVar,
    is_literal,
    raises_in_python,
    unsupported,
)

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["OuterException", "TracedRaise", "catch", "handled_exception", "known_exception"]


class TracedRaise(RaisesInPython):
    """Traced code raised an exception whose class and arguments are known; a handler may catch it."""

    def __init__(self, value: ExceptionVar) -> None:
        name = value.cls.__name__
        super().__init__(f"{name}{tuple(a.const() for a in value.args)!r} is raised ({name})")
        self.value = value


def handled_exception(tx: Tracer) -> VT:
    """``sys.exception()`` in traced code: the exception a traced handler is handling."""
    handled = tx.root().handled_exception
    if isinstance(handled, OuterException):
        unsupported("sys.exception() outside a handler of an exception raised by traced code")
    return handled


def _current_exception() -> BaseException | None:
    return sys.exc_info()[1]


class OuterException(VT):
    """The exception Python was handling when the converted frame was called (or None)."""

    def reconstruct(self, cg: CodeGen) -> None:
        cg.call_helper(_current_exception, lambda: 0)

    def __repr__(self) -> str:
        return "OuterException()"


def known_exception(exc: RaisesInPython) -> ExceptionVar | None:
    """The exception ``exc`` stands for, when its class and arguments are known constants."""
    if isinstance(exc, TracedRaise):
        return exc.value
    real = getattr(exc, "exception", None)
    from dynajit.capture._symbolic.variables.identity import TraceId

    # A TraceId (a KeyError of a dict keyed by id()) is caught like a literal; it can never be rebuilt in Python.
    if not isinstance(real, BaseException) or not all(is_literal(a) or isinstance(a, TraceId) for a in real.args):
        return None
    return ExceptionVar(type(real), [ConstVar(a) for a in real.args])


def catch(tx: Tracer, inst: Inst, exc: RaisesInPython) -> None:
    """``inst`` of ``tx`` raised ``exc``: continue at the frame's handler, or pass it on to the caller.

    Returns when ``tx`` continues at a handler; otherwise raises (a known exception as a
    :class:`TracedRaise`, so the caller's instruction catches it in turn).
    """
    value = known_exception(exc)
    region = None if value is None else region_of(tx.code, tx.insts, inst)
    if value is not None and region is not None and _stop_iteration_guard(tx.insts[region.handler]):
        # 3.12+: a generator body's outermost handler. It turns StopIteration into RuntimeError (PEP 479),
        # left for Python to raise; any other exception leaves the generator unchanged.
        if issubclass(value.cls, StopIteration):
            raise RaisesInPython(f"a generator raised StopIteration ({exc.reason})") from None
        region = None
    if tx.parent is None:
        origin = tx.steps - 1 if tx.exc_origin is None else tx.exc_origin
        tx.exc_origin = origin
        if region is None:
            # Nothing here catches it: Python raises it from where the root frame left its normal flow, so
            # the graph is cut there and the handlers traced since run in Python too.
            tx.steps = origin + 1
    if value is None:
        raise exc
    if region is None:
        if isinstance(exc, TracedRaise):
            raise exc
        raise TracedRaise(value) from None
    del tx.stack[region.depth :]
    if region.push_lasti:
        tx.push(ConstVar(inst.offset))
    tx.push(value)
    tx.jump(region.handler)


def _stop_iteration_guard(inst: Inst) -> bool:
    return inst.opname == "CALL_INTRINSIC_1" and getattr(inst.arg, "name", None) == "INTRINSIC_STOPITERATION_ERROR"


def _throw(value: VT) -> None:
    if not isinstance(value, ExceptionVar) or not all(a.is_const() and is_literal(a.const()) for a in value.args):
        raises_in_python(f"raising {value}: the exception is raised in Python")
    raise TracedRaise(value)


def _exception_class(value: VT) -> Any:
    real = value.const() if value.is_const() else getattr(value, "value", None)
    return real if isinstance(real, type) and issubclass(real, BaseException) else None


@handler("RAISE_VARARGS")
def _raise(tx: Tracer, inst: Inst) -> None:
    if inst.arg == 0:
        handled = tx.root().handled_exception
        if not isinstance(handled, ExceptionVar):
            raises_in_python("a bare raise of an exception not raised by traced code: it is raised in Python")
        _throw(handled)
    if inst.arg == 2:
        tx.pop()  # the cause: kept only by the exception Python raises when nothing catches it here
    value = tx.pop()
    cls = _exception_class(value)
    if cls is not None:
        value = tx.call(value, [], {})
    _throw(value)


@handler("PUSH_EXC_INFO")
def _push_exc_info(tx: Tracer, inst: Inst) -> None:
    root = tx.root()
    value = tx.pop()
    tx.push(root.handled_exception)
    root.handled_exception = value
    tx.push(value)


@handler("POP_EXCEPT")
def _pop_except(tx: Tracer, inst: Inst) -> None:
    root = tx.root()
    root.handled_exception = tx.pop()
    if isinstance(root.handled_exception, OuterException) and not any(
        isinstance(v, ExceptionVar) for t in _frames(tx) for v in t.stack
    ):
        root.exc_origin = None  # handling is over: the frame is back in its normal flow


def _frames(tx: Tracer) -> list[Tracer]:
    frames = [tx]
    while frames[-1].parent is not None:
        frames.append(frames[-1].parent)
    return frames


def _matches(tx: Tracer, value: VT, against: VT) -> bool:
    classes = against.unpack(tx) if isinstance(against, TupleVar) else [against]
    real = [_exception_class(c) for c in classes]
    if any(c is None for c in real):
        unsupported(f"except clause over {against}, which is not an exception class known while tracing")
    return issubclass(value.python_type(), tuple(real))


@handler("CHECK_EXC_MATCH")
def _check_exc_match(tx: Tracer, inst: Inst) -> None:
    against = tx.pop()
    value = tx.stack[-1]
    if not isinstance(value, ExceptionVar):
        unsupported(f"matching {value} against an except clause")
    tx.push(ConstVar(_matches(tx, value, against)))


@handler("RERAISE")
def _reraise(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    if inst.arg:
        tx.pop()  # the lasti of the raising instruction
    if not isinstance(value, ExceptionVar):
        unsupported(f"re-raising {value}, an exception not raised by traced code")
    _throw(value)


@handler("WITH_EXCEPT_START")
def _with_except_start(tx: Tracer, inst: Inst) -> None:
    value = tx.stack[-1]
    if not isinstance(value, ExceptionVar):
        unsupported(f"leaving a with block by {value}, an exception not raised by traced code")
    exit_method = tx.stack[-4]
    tx.push(tx.call(exit_method, [ConstVar(value.cls), value, ConstVar(None)], {}))


@handler("LOAD_ASSERTION_ERROR")
def _load_assertion_error(tx: Tracer, inst: Inst) -> None:
    tx.push(tx.wrap(AssertionError, None))
