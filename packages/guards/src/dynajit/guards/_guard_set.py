"""GuardSet: an ordered, deduplicated collection of guards that prints and compiles."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import CellType
from typing import Any

from ._compile import CompiledGuards, compile_guards
from ._guard import Guard

__all__ = ["GuardSet"]


class GuardSet:
    """Guards in insertion order, each kept once (guards compare by kind, sources and expected values).

    ``str()`` lists one guard per line in the seed's format (``- local 'a' TENSOR_MATCH``);
    ``format(verbose=True)`` adds each guard's details and checks.
    """

    def __init__(self, guards: Iterable[Guard] = ()) -> None:
        self._guards: dict[Guard, None] = {}
        self.extend(guards)

    def add(self, guard: Guard) -> None:
        """Add ``guard`` unless an equal one is already there."""
        if not isinstance(guard, Guard):
            raise TypeError(f"GuardSet holds guards made by the guard factories (tensor_match, ...), got {guard!r}")
        self._guards.setdefault(guard, None)

    def extend(self, guards: Iterable[Guard]) -> None:
        """Add every guard of ``guards`` (another GuardSet or any iterable of guards)."""
        for guard in guards:
            self.add(guard)

    update = extend

    def __iter__(self) -> Iterator[Guard]:
        return iter(self._guards)

    def __len__(self) -> int:
        return len(self._guards)

    def __contains__(self, guard: object) -> bool:
        return guard in self._guards

    def __bool__(self) -> bool:
        return bool(self._guards)

    def __or__(self, other: Iterable[Guard]) -> GuardSet:
        merged = GuardSet(self)
        merged.extend(other)
        return merged

    def kinds(self) -> list[str]:
        """The kind of each guard, in order."""
        return [guard.kind for guard in self._guards]

    def format(self, verbose: bool = False) -> str:
        """One guard per line; with ``verbose``, each guard's details and its checks indented below it."""
        lines = []
        for guard in self._guards:
            lines.append(f"- {guard}")
            if verbose:
                lines.append(f"    {guard.detail}")
                lines.extend(f"    | {check.readable()}" for check in guard.checks)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"GuardSet({len(self)} guards)"

    def compile(
        self,
        arg_names: Sequence[str],
        f_globals: Mapping[str, Any],
        closure: Mapping[str, CellType] | None = None,
    ) -> CompiledGuards:
        """Compile into one generated check function.

        ``arg_names`` are the guarded function's argument names in positional
        order (``code.co_varnames[:n_args]``, ``*args``/``**kwargs`` names
        included); ``f_globals`` is its globals dict, read at check time;
        ``closure`` maps free-variable names to their cells.
        """
        return compile_guards(list(self._guards), arg_names, f_globals, closure)
