"""The fuzzer's exception handling: ``try`` statements whose body raises on some calls and not on others.

The raising step depends on sizes: an index, a ``view`` or int arithmetic on a
size (``n // (n - k)``, ``1 << (n - k)``) with ``k`` taken from the sizes the
calls really have, so the same compiled entry meets both outcomes once the
size is dynamic. The handler assigns the same name, so the program goes on
either way; a graph break may sit in the body, and a ``finally`` or ``else``
clause may follow. :class:`FlowMixin` is mixed into the generator, which owns
the state named in its annotations.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from .features import Features
from .program import Stmt

HANDLED = "(IndexError, RuntimeError, ValueError, ZeroDivisionError)"


class FlowMixin:
    """``try`` statements for :class:`tests.fuzz.generator.Generator`."""

    rng: random.Random
    features: Features
    tensor: Callable[..., str | None]
    value: Callable[[str], Any]
    fresh: Callable[..., str]
    expr: Callable[[], tuple[str, list[str]] | None]
    _every_call: Callable[[str], list[torch.Tensor]]
    _try: Callable[[Stmt], bool]

    def _raising_on_some_calls(self, a: str) -> str | None:
        """An expression over tensor ``a`` that raises for some of the calls' sizes of ``a`` (or None)."""
        rng = self.rng
        values = self._every_call(a)
        if not values or values[0].dim() == 0:
            return None
        d = rng.randrange(values[0].dim())
        sizes = sorted({v.shape[d] for v in values if v.dim() > d})
        k = rng.choice(sizes) + rng.choice([0, 0, 1, -1])
        size = f"{a}.shape[{d}]"
        return rng.choice(
            [
                f"{a}.select({d}, {k})",
                f"{a}[{k}]" if d == 0 else f"{a}.select({d}, {k})",
                f"{a}.reshape({max(k, 1)}, -1)",
                f"{a}.view({max(k, 1)}, -1)",
                f"{a} * ({size} // ({size} - {k}))",
                f"{a} * ({size} % ({size} - {k}))",
                f"{a} * (1 << ({size} - {k}))",
                f"{a}.narrow({d}, 0, {k})",
            ]
        )

    def try_statement(self) -> bool:
        """``try: ... v = <raises on some calls> except ...: v = <other>``, sometimes with a break inside,
        an ``else`` or a ``finally``."""
        rng = self.rng
        a = self.tensor(lambda t: t.dim() > 0)
        other = self.expr()
        if a is None or other is None:
            return False
        risky = self._raising_on_some_calls(a)
        if risky is None:
            return False
        target = self.fresh()
        body = [Stmt([f"{target} = {risky}"])]
        if rng.random() < 0.3 and (before := self.expr()) is not None:
            body.insert(0, Stmt([f"{self.fresh()} = {before[0]}"]))
        if self.features.graph_breaks and rng.random() < 0.3:
            body.insert(
                rng.randint(0, len(body) - 1), Stmt([rng.choice(['print(end="")', "dynajit.capture.graph_break()"])])
            )
        handler = [Stmt([f"{target} = {other[0]}"])]
        clauses = [("try:", body), (f"except {HANDLED}:", handler)]
        if rng.random() < 0.2:
            clauses.append(("else:", [Stmt([f"{target} = {target} * 2"])]))
        if rng.random() < 0.2 and (last := self.expr()) is not None:
            clauses.append(("finally:", [Stmt([f"{self.fresh()} = {last[0]}"])]))
        return self._try(Stmt(clauses=clauses, alts=[handler]))
