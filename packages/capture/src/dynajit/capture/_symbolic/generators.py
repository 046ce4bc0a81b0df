"""Generators called from traced code: run lazily, one ``yield`` at a time, as Python runs them.

A generator's body runs in its own inlined tracer, paused after each
``yield``; each ``next`` (a ``for`` loop's FOR_ITER, ``next()``) runs it to
its following ``yield``, and consuming it whole (``list(gen)``, ``zip``)
runs it to its end at that point. Running the whole body at the call instead
would read the state before the consumer's own steps: a generator over a
variable or tensor the loop body re-binds or mutates would yield stale values.
A generator suspended part-way cannot be rebuilt in Python, so a graph break
with one live is not resumable. ``yield from`` (SEND and END_SEND here;
GET_YIELD_FROM_ITER shares GET_ITER's handler) delegates item by item to the
inner iterator, which may itself be a lazy generator; only ``None`` is ever
sent, since iteration sends nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dynajit.capture._symbolic.exceptions import known_exception
from dynajit.capture._symbolic.registry import handler
from dynajit.capture._symbolic.variables import VT, ConstVar, IteratorVar, RaisesInPython, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["LazyGeneratorVar"]


class LazyGeneratorVar(IteratorVar):
    """A generator object made while tracing; its items are what it has yielded so far."""

    def __init__(self, body: Tracer) -> None:
        super().__init__([])
        self.body = body
        body.yielded = self.items  # YIELD_VALUE appends here

    def _advance(self) -> bool:
        """Run the body to its next ``yield``; False once it has returned."""
        body = self.body
        before = len(self.items)
        caller = body.output.current_tx
        try:
            while not body.done and len(self.items) == before:
                body.step()  # a break in the body leaves it the current frame, for the break's report
        except RaisesInPython as exc:
            body.done = True  # a generator that raised is finished
            raised = known_exception(exc)
            if raised is not None and issubclass(raised.cls, StopIteration):
                # Python turns it into a RuntimeError (PEP 479): left for Python to raise.
                raise RaisesInPython(f"a generator raised StopIteration ({exc.reason})") from None
            raise
        body.output.current_tx = caller
        return len(self.items) > before

    def next(self) -> VT | None:
        if self.position >= len(self.items) and not self._advance():
            return None
        return super().next()

    def unpack(self, tx: Tracer) -> list[VT]:
        while self._advance():
            pass
        return super().unpack(tx)

    def children(self) -> list[VT]:
        return []  # a live generator is never rebuilt (see reconstruct)

    def reconstruct(self, cg: CodeGen) -> None:
        unsupported("a generator suspended while tracing cannot be rebuilt in Python")

    def __repr__(self) -> str:
        return f"LazyGeneratorVar({self.body.code.co_name}, yielded={len(self.items)})"


@handler("SEND")
def _send(tx: Tracer, inst: Inst) -> None:
    """``receiver.send(value)``: the next item delegated by ``yield from``; at the end, jump with its result."""
    sent = tx.pop()
    if not (sent.is_const() and sent.const() is None):
        unsupported("sending a value other than None into a generator")
    receiver = tx.stack[-1]
    if not isinstance(receiver, IteratorVar):
        unsupported(f"yield from {receiver}")
    item = receiver.next()
    if item is not None:
        tx.push(item)
        return
    result = receiver.body.result if isinstance(receiver, LazyGeneratorVar) else None
    if tx.version < (3, 12):
        tx.pop()  # 3.11 pops the receiver too; later versions leave it for END_SEND
    tx.push(result if result is not None else ConstVar(None))
    tx.jump(inst.target)


@handler("END_SEND", since=(3, 12))
def _end_send(tx: Tracer, inst: Inst) -> None:
    value = tx.pop()
    tx.pop()
    tx.push(value)
