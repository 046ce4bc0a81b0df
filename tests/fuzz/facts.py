"""The fuzzer's changed facts: module-level state a program reads, changed between calls, so guards are tested.

A program with the ``changed_facts`` feature reads a global int ``K``, a module-level ``FACTS`` object (a flag,
a scale, a dict ``table``, an attribute ``extra`` that is there on some calls only) and a module tree ``NET``
(its parameters walked, its second layer's weight tied to the first's on some calls, an extra parameter
registered on some calls) in arithmetic, conditions,
loops, ``getattr``/``hasattr`` and ``in``, and through two autograd Functions whose forward and backward read
them (their own backward rule gives the gradients, so a backward traced with an old fact shows). Before each
call ``make_args`` runs ``set_facts(call)`` (:data:`tests.fuzz.program.FACTS_SOURCE`): ``K`` is rebound, the
attributes rewritten, the dict's keys changed in place, ``extra`` added or deleted, and the modules in ``MODS``
switched between train and eval mode. A compiled entry that relied on the old value and missed the change
answers for the old world: every fact it read must be guarded (or the compiled call must recompile).
:class:`FactsMixin` is mixed into the generator.
"""

from __future__ import annotations

import random
from typing import Any

from .program import Stmt

# What reads NET's shape: the walk of its parameters (a registered or tied parameter changes what it yields), and
# both layers' weights read by their own paths (tied, one tensor reached twice).
_NET_READS = [
    "sum(p.sum() for p in NET.parameters())",
    "NET[1].weight.sum()",
    "(NET[0].weight.sum() + NET[1].weight.sum())",
    "len(list(NET.named_parameters()))",
]


def draw_facts(rng: random.Random, calls: int) -> list[dict[str, Any]]:
    """Per call, the facts ``set_facts`` sets: the first call's, then each later one changes one or two."""
    first = {
        "K": rng.randint(1, 3),
        "flag": rng.random() < 0.5,
        "scale": rng.choice([0.5, 2.0, -1.0]),
        "keys": tuple(rng.sample(["a", "b", "c"], rng.randint(0, 2))),
        "extra": rng.choice([None, 2, 3]),
        "training": None,
        "tied": rng.random() < 0.5,
        "extra_param": rng.random() < 0.5,
    }
    facts = [first]
    for _ in range(calls - 1):
        changed = dict(facts[-1])
        for name in rng.sample(list(first), rng.randint(1, 2)):
            changed[name] = _other(rng, name, changed[name])
        facts.append(changed)
    return facts


def _other(rng: random.Random, name: str, value: Any) -> Any:
    choices = {
        "K": [1, 2, 3, 4],
        "flag": [True, False],
        "scale": [0.5, 2.0, -1.0, 3.0],
        "keys": [(), ("a",), ("b",), ("a", "b"), ("c", "a")],
        "extra": [None, 2, 3],
        "training": [True, False],
        "tied": [True, False],
        "extra_param": [True, False],
    }[name]
    others = [c for c in choices if c != value]
    return rng.choice(others) if others else value


class FactsMixin:
    """Statements reading ``K`` and ``FACTS`` for :class:`tests.fuzz.generator.Generator`."""

    rng: random.Random

    # Provided by the expression mixin and the generator.
    tensor: Any
    fresh: Any
    _try: Any
    _branch_bodies: Any

    def fact_statement(self) -> bool:
        rng = self.rng
        a = self.tensor()
        if a is None:
            return False
        if rng.random() < 0.4:
            cond = rng.choice(
                [
                    "FACTS.flag",
                    '"a" in FACTS.table',
                    'hasattr(FACTS, "extra")',
                    "len(FACTS.table) > 1",
                    "K > 2",
                    "FACTS.scale > 0",
                    "len(list(NET.parameters())) > 4",
                ]
            )
            bodies = self._branch_bodies()
            if bodies is None:
                return False
            then, other = bodies
            return self._try(Stmt(clauses=[(f"if {cond}:", then), ("else:", other)], alts=[then, other]))
        name = self.fresh()
        if rng.random() < 0.3:  # autograd Functions whose methods read the facts (their own backward's rule)
            return self._try(Stmt([f"{name} = {rng.choice(['ScaledByK', 'ScaledByFacts'])}.apply({a})"]))
        if rng.random() < 0.2:
            acc = self.fresh()
            lines = [f"{acc} = {a}", "for _ in range(K):", f"    {acc} = {acc} * 0.5 + 1", f"{name} = {acc}"]
            return self._try(Stmt(lines))
        if rng.random() < 0.3:  # the module tree's shape: its parameters walked, or read by a path tied weights share
            walk = rng.choice(_NET_READS)
            return self._try(Stmt([f"{name} = {a} * {walk}"]))
        factor = rng.choice(
            [
                "K",
                "FACTS.scale",
                'getattr(FACTS, "extra", 1)',
                "len(FACTS.table)",
                "(2 if FACTS.flag else 3)",
                'FACTS.table.get("b", 0)',
            ]
        )
        return self._try(Stmt([f"{name} = {a} * {factor}"]))
