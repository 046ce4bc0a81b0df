"""The fuzzer's Python objects: a ``State`` argument of attributes, lists, dicts and boxes that programs read and rewrite.

A program with the ``objects`` feature takes ``st``, a fresh ``State`` (:data:`tests.fuzz.program.STATE_SOURCE`)
per call, and mixes statements that read tensors out of it
(``st.items[0]``, ``st.d["k"].t``) with ones that rewrite it: attribute writes,
list and dict mutations (reverse, swap, pop, insert, renamed keys), new boxes,
in-place ops on tensors it holds, and attribute writes on objects reached
through a container an earlier statement rewrote. After each call the runner
compares ``st.snapshot()``: every value, which original box sits where (each
box keeps the index it was made with), and every box's attributes.
:class:`ObjectsMixin` is mixed into the generator, which owns the state named
in its annotations.
"""

from __future__ import annotations

import random
from typing import Any

from .program import Stmt

# Tensors read out of ``st`` (each bound to a fresh local).
STATE_READS = (
    "st.a",
    "st.items[0]",
    "st.items[-1]",
    "st.boxes[0].t",
    "st.boxes[-1].t",
    "st.boxes[-1].value",
    'st.d["k"].t',
    'st.d["w"]',
    "st.a * st.n",
    "sum(st.items)",
    "st.items[0] + st.boxes[0].t",
)


class ObjectsMixin:
    """Statements over the ``st`` argument for :class:`tests.fuzz.generator.Generator`."""

    rng: random.Random
    counter: int
    program: Any

    # Provided by the expression mixin and the generator.
    tensor: Any
    fresh: Any
    _try: Any

    def _state_writes(self, t: str) -> list[list[str]]:
        box = self.fresh("b")
        return [
            [f"st.a = {t} + 1"],
            [f"st.items.append({t})"],
            ["st.items.reverse()"],
            ["st.items[0], st.items[-1] = st.items[-1], st.items[0]"],
            ["st.items.pop(0)"],
            [f"st.items.insert(0, {t} * 2)"],
            ["st.boxes.reverse()", f"st.boxes[0].t = {t}"],
            [f"st.boxes[0].t = {t} * 2"],
            [f"st.boxes[-1].u = {t}"],
            ['st.d["k2"] = st.d.pop("k")', f'st.d["k2"].t = {t} - 1'],
            ['st.d["k"], st.d["w"] = st.d["w"], st.d["k"]'],
            [f'st.d.setdefault("z", {t})'],
            ['st.d["k"].t.add_(1)'],
            ["st.items[0].mul_(2)"],
            ["st.a.zero_()"],
            ['del st.d["w"]'],
            ["st.n += 1"],
            ["st.n = len(st.items)"],
            ["st.boxes = st.boxes[::-1]"],
            ["st.box = st.boxes[0]", f"st.box.t = {t} + 3"],
            [f"{box} = st.boxes[0]", f"st.boxes[0] = Box(-1, {t})", f"{box}.t = {box}.t * 2"],
            [f"{box} = st.d", 'st.d = {"w": st.a}', f'{box}["k"].t = {t}'],
        ]

    def state_statement(self) -> bool:
        """A read of a tensor out of ``st`` into a fresh local, or a rewrite of ``st``; half of them through both
        names of the list of ints a shared ``st`` holds twice."""
        shared = any(arg.shared for arg in self.program.args)
        if shared and self.rng.random() < 0.5:
            return self._shared_statement()
        if self.rng.random() < 0.4:
            return self._try(Stmt([f"{self.fresh()} = {self.rng.choice(STATE_READS)}"]))
        t = self.tensor()
        if t is None:
            return False
        return self._try(Stmt(self.rng.choice(self._state_writes(t))))

    def _shared_statement(self) -> bool:
        """A write through one name of the shared list and a read through the other into ``st.a`` (which the
        snapshot compares), or writes through both: each differs when the two names are one list."""
        pairs = [
            ["st.more.append(3)", "st.a = st.a * len(st.counts)"],
            ["st.counts[0] += 2", "st.a = st.a + st.more[0]"],
            ["st.counts.reverse()", "st.a = st.a * st.more[0]"],
            ["st.more.pop(0)", "st.a = st.a + len(st.counts)"],
            ["st.counts.append(4)", "st.more.append(5)"],
            ["st.a = st.a * (2 if st.more is st.counts else 3)"],
        ]
        return self._try(Stmt(self.rng.choice(pairs)))
