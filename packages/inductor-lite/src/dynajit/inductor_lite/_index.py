"""Index arithmetic: affine combinations of loop variables with floor-division and modulo atoms.

Views become index arithmetic, so every load address is an :class:`Index`. Indices are kept in
a canonical form (sorted terms, folded constants) so two loads of the same element compare equal,
and simplified with the ranges of the loop variables so reshapes of matching shapes cost nothing.
All quantities are non-negative, which makes C's ``/`` and ``%`` agree with floor semantics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["DivMod", "Index", "Var", "flatten", "unflatten"]


@dataclass(frozen=True, order=True)
class Var:
    """A loop variable ranging over ``[0, size)``."""

    name: str
    size: int


@dataclass(frozen=True)
class DivMod:
    """``(base // div) % mod`` (no modulo when ``mod`` is None)."""

    base: Index
    div: int
    mod: int | None


Atom = Var | DivMod


def _atom_key(atom: Atom) -> tuple:
    if isinstance(atom, Var):
        return (0, atom.name)
    return (1, atom.base.key(), atom.div, atom.mod or 0)


def _atom_max(atom: Atom) -> int:
    if isinstance(atom, Var):
        return max(atom.size - 1, 0)
    top = atom.base.max_value() // atom.div
    return top if atom.mod is None else min(top, atom.mod - 1)


@dataclass(frozen=True)
class Index:
    """``const + sum(coeff * atom)`` in canonical form."""

    terms: tuple[tuple[Atom, int], ...] = ()
    const: int = 0

    @staticmethod
    def of(value: int | Var | Index) -> Index:
        if isinstance(value, Index):
            return value
        if isinstance(value, Var):
            return Index(((value, 1),)) if value.size != 1 else Index()
        return Index((), int(value))

    def key(self) -> tuple:
        return (tuple((_atom_key(a), c) for a, c in self.terms), self.const)

    def max_value(self) -> int:
        return self.const + sum(c * _atom_max(a) for a, c in self.terms)

    def is_constant(self) -> bool:
        return not self.terms

    def __add__(self, other: int | Var | Index) -> Index:
        other = Index.of(other)
        return _build(list(self.terms) + list(other.terms), self.const + other.const)

    __radd__ = __add__

    def __mul__(self, factor: int) -> Index:
        if factor == 0:
            return Index()
        return _build([(a, c * factor) for a, c in self.terms], self.const * factor)

    __rmul__ = __mul__

    def floordiv(self, div: int) -> Index:
        return _divmod(self, div, None)

    def mod(self, mod: int) -> Index:
        return _divmod(self, 1, mod)

    def variables(self) -> set[str]:
        names: set[str] = set()
        for atom, _ in self.terms:
            if isinstance(atom, Var):
                names.add(atom.name)
            else:
                names |= atom.base.variables()
        return names

    def has_divmod(self, names: set[str] | None = None) -> bool:
        for atom, _ in self.terms:
            if isinstance(atom, DivMod) and (names is None or atom.base.variables() & names):
                return True
        return False

    def coefficient(self, var_name: str) -> int:
        for atom, c in self.terms:
            if isinstance(atom, Var) and atom.name == var_name:
                return c
        return 0

    def subs(self, mapping: Mapping[str, Index]) -> Index:
        out = Index((), self.const)
        for atom, c in self.terms:
            if isinstance(atom, Var):
                out = out + (mapping[atom.name] if atom.name in mapping else Index.of(atom)) * c
            else:
                out = out + _divmod(atom.base.subs(mapping), atom.div, atom.mod) * c
        return out

    def render(self, atom_printer: Callable[[str, int, int | None], str]) -> str:
        """Render as source text; ``atom_printer(base_text, div, mod)`` spells a DivMod."""
        parts = []
        for atom, c in self.terms:
            text = (
                atom.name if isinstance(atom, Var) else atom_printer(atom.base.render(atom_printer), atom.div, atom.mod)
            )
            parts.append(text if c == 1 else f"{c}*{text}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)

    def source(self, floordiv: str) -> str:
        """Source text in a C-like language whose (non-negative) floor division is spelt ``floordiv``."""

        def atom(base: str, div: int, mod: int | None) -> str:
            text = f"(({base}) {floordiv} {div})" if div != 1 else f"({base})"
            return f"({text} % {mod})" if mod is not None else text

        return self.render(atom)


def _build(terms: list[tuple[Atom, int]], const: int) -> Index:
    merged: dict[Atom, int] = {}
    for atom, c in terms:
        merged[atom] = merged.get(atom, 0) + c
    items = [(a, c) for a, c in merged.items() if c != 0]
    # Fold c*m*((x//(d*m)) % n) + c*((x//d) % m) into c*((x//d) % (m*n)): a reshape undone by a reshape.
    for i, (low, c_low) in enumerate(items):
        if not isinstance(low, DivMod) or low.mod is None:
            continue
        for j, (high, c_high) in enumerate(items):
            if (
                i != j
                and isinstance(high, DivMod)
                and high.base == low.base
                and high.div == low.div * low.mod
                and c_high == c_low * low.mod
            ):
                new_mod = None if high.mod is None else high.mod * low.mod
                folded = _divmod(low.base, low.div, new_mod) * c_low
                rest = [t for k, t in enumerate(items) if k not in (i, j)]
                return _build(rest + list(folded.terms), const + folded.const)
    items.sort(key=lambda t: _atom_key(t[0]))
    return Index(tuple(items), const)


def _divmod(base: Index, div: int, mod: int | None) -> Index:
    if mod == 1:
        return Index()
    if div == 1 and mod is None:
        return base
    # Terms whose coefficient is a multiple of div pass through the division exactly when the rest stays below div.
    high = [(a, c) for a, c in base.terms if c % div == 0]
    low = Index(tuple((a, c) for a, c in base.terms if c % div != 0), base.const % div)
    high_const = base.const - base.const % div
    if low.max_value() < div:
        quotient = _build([(a, c // div) for a, c in high], high_const // div)
        return quotient if mod is None else _apply_mod(quotient, mod)
    if div == 1 and mod is not None:
        return _apply_mod(base, mod)
    if mod is not None and base.max_value() // div < mod:
        mod = None
    return Index(((DivMod(base, div, mod), 1),))


def _apply_mod(value: Index, mod: int) -> Index:
    kept = Index(tuple((a, c) for a, c in value.terms if c % mod != 0), value.const % mod)
    if kept.max_value() < mod:
        return kept
    return Index(((DivMod(kept, 1, mod), 1),))


def flatten(indices: Sequence[Index], sizes: Sequence[int]) -> Index:
    """The row-major flat offset of ``indices`` in a tensor of ``sizes``."""
    flat = Index()
    stride = 1
    for idx, size in zip(reversed(indices), reversed(sizes)):
        flat = flat + idx * stride
        stride *= size
    return flat


def unflatten(flat: Index, sizes: Sequence[int]) -> list[Index]:
    """The row-major multi-index of ``flat`` in a tensor of ``sizes``."""
    out: list[Index] = []
    if 0 in sizes:  # no elements: every index is unreachable
        return [Index() for _ in sizes]
    stride = 1
    for size in reversed(sizes):
        out.append(Index() if size == 1 else _divmod(flat, stride, size))
        stride *= size
    return out[::-1]
