"""Index arithmetic: affine combinations of loop variables with floor-division and modulo atoms.

Views become index arithmetic, so every load address is an :class:`Index`. Indices are kept in
a canonical form (sorted terms, folded constants) so two loads of the same element compare equal,
and simplified with the ranges of the loop variables so reshapes of matching shapes cost nothing.
All quantities are non-negative, which makes C's ``/`` and ``%`` agree with floor semantics.
Sizes, coefficients, divisors and moduli may be sympy expressions over shape symbols (dynamic
graphs); a simplification is made only when it holds for every allowed value of the symbols.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dynajit.inductor_lite import _sym

__all__ = ["DivMod", "Index", "Var", "flatten", "unflatten"]


@dataclass(frozen=True, order=True)
class Var:
    """A loop variable ranging over ``[0, size)``."""

    name: str
    size: Any  # int, or a sympy expression over shape symbols


@dataclass(frozen=True)
class DivMod:
    """``(base // div) % mod`` (no modulo when ``mod`` is None)."""

    base: Index
    div: Any
    mod: Any  # None: no modulo


Atom = Var | DivMod


def _size_key(value: Any) -> tuple:
    # Ints sort as before; symbolic sizes after them, by their text (sympy values do not order).
    return (value,) if isinstance(value, int) else (1 << 62, str(value))


def _atom_key(atom: Atom) -> tuple:
    if isinstance(atom, Var):
        return (0, atom.name)
    return (1, atom.base.key(), _size_key(atom.div), _size_key(atom.mod or 0))


def _atom_max(atom: Atom) -> Any:
    if isinstance(atom, Var):
        return _sym.maximum(_sym.norm(atom.size - 1), 0)
    top = _sym.floordiv_max(atom.base.max_value(), atom.div)
    if atom.mod is None:
        return top
    if isinstance(top, int) and isinstance(atom.mod, int):
        return min(top, atom.mod - 1)
    # Either bound is valid; a symbolic Min would defeat interval reasoning, so keep the provably smaller one.
    return top if _sym.provably_le(top, atom.mod - 1) else _sym.norm(atom.mod - 1)


@dataclass(frozen=True)
class Index:
    """``const + sum(coeff * atom)`` in canonical form."""

    terms: tuple[tuple[Atom, Any], ...] = ()
    const: Any = 0

    @staticmethod
    def of(value: Any) -> Index:
        if isinstance(value, Index):
            return value
        if isinstance(value, Var):
            return Index(((value, 1),)) if value.size != 1 else Index()
        return Index((), _sym.norm(value))

    def key(self) -> tuple:
        return (tuple((_atom_key(a), _size_key(c)) for a, c in self.terms), _size_key(self.const))

    def max_value(self) -> Any:
        return _sym.norm(self.const + sum(c * _atom_max(a) for a, c in self.terms))

    def is_constant(self) -> bool:
        return not self.terms

    def __add__(self, other: int | Var | Index) -> Index:
        other = Index.of(other)
        return _build(list(self.terms) + list(other.terms), self.const + other.const)

    __radd__ = __add__

    def __mul__(self, factor: Any) -> Index:
        factor = _sym.norm(factor)
        if factor == 0:
            return Index()
        return _build([(a, c * factor) for a, c in self.terms], self.const * factor)

    __rmul__ = __mul__

    def floordiv(self, div: Any) -> Index:
        return _divmod(self, _sym.norm(div), None)

    def mod(self, mod: Any) -> Index:
        return _divmod(self, 1, _sym.norm(mod))

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

    def coefficient(self, var_name: str) -> Any:
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

    def render(self, atom_printer: Callable[[str, Any, Any], str], size_text: Callable[[Any], str] = str) -> str:
        """Render as source text; ``atom_printer(base_text, div, mod)`` spells a DivMod, ``size_text`` a size."""
        parts = []
        for atom, c in self.terms:
            text = (
                atom.name
                if isinstance(atom, Var)
                else atom_printer(atom.base.render(atom_printer, size_text), atom.div, atom.mod)
            )
            parts.append(text if c == 1 else f"{size_text(c)}*{text}")
        if self.const != 0 or not parts:
            parts.append(size_text(self.const))
        return " + ".join(parts)

    def source(self, floordiv: str, size_text: Callable[[Any], str] = str) -> str:
        """Source text in a C-like language whose (non-negative) floor division is spelt ``floordiv``."""

        def atom(base: str, div: Any, mod: Any) -> str:
            text = f"(({base}) {floordiv} {size_text(div)})" if div != 1 else f"({base})"
            return f"({text} % {size_text(mod)})" if mod is not None else text

        return self.render(atom, size_text)

    def sizes(self) -> list[Any]:
        """Every coefficient, constant, divisor and modulus (to find the shape symbols an index uses)."""
        found = [self.const]
        for atom, c in self.terms:
            found.append(c)
            if isinstance(atom, Var):
                found.append(atom.size)
            else:
                found += [atom.div, atom.mod, *atom.base.sizes()]
        return found


def _build(terms: list[tuple[Atom, Any]], const: Any) -> Index:
    merged: dict[Atom, Any] = {}
    for atom, c in terms:
        merged[atom] = _sym.norm(merged.get(atom, 0) + c)
    const = _sym.norm(const)
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
                and _sym.eq(high.div, low.div * low.mod)
                and _sym.eq(c_high, c_low * low.mod)
            ):
                new_mod = None if high.mod is None else _sym.norm(high.mod * low.mod)
                folded = _divmod(low.base, low.div, new_mod) * c_low
                rest = [t for k, t in enumerate(items) if k not in (i, j)]
                return _build(rest + list(folded.terms), const + folded.const)
    items.sort(key=lambda t: _atom_key(t[0]))
    return Index(tuple(items), const)


def _split_const(const: Any, div: Any) -> tuple[Any, Any] | None:
    """(multiple of div, remainder below div) parts of a constant, or None when that is not provable."""
    if isinstance(const, int) and isinstance(div, int):
        return const - const % div, const % div
    if _sym.divisible(const, div):
        return const, 0
    if _sym.provably_le(0, const) and _sym.provably_lt(const, div):
        return 0, const
    return None


def _divmod(base: Index, div: Any, mod: Any) -> Index:
    if mod == 1:
        return Index()
    if div == 1 and mod is None:
        return base
    # Terms whose coefficient is a multiple of div pass through the division exactly when the rest stays below div.
    high = [(a, c) for a, c in base.terms if _sym.divisible(c, div)]
    parts = _split_const(base.const, div)
    if parts is not None:
        high_const, low_const = parts
        low = Index(tuple((a, c) for a, c in base.terms if not _sym.divisible(c, div)), low_const)
        quotient = _build([(a, _sym.exact_quotient(c, div)) for a, c in high], _sym.exact_quotient(high_const, div))
        if _sym.provably_lt(low.max_value(), div):
            return quotient if mod is None else _apply_mod(quotient, mod)
        if high or high_const != 0:
            # (d*q + low) // d == q + low // d for any low: the division keeps only the variables it needs,
            # so a modulo of the sum can drop q's multiples and cancel against the low part.
            split = quotient + _divmod(low, div, None)
            return split if mod is None else _apply_mod(split, mod)
    if div == 1 and mod is not None:
        return _apply_mod(base, mod)
    reduced = _reduce_divisor(base, div, mod)
    if reduced is not None:
        return reduced
    if mod is not None and _sym.provably_lt(base.max_value(), _sym.norm(div * mod)):  # max // div < mod
        mod = None
    return Index(((DivMod(base, div, mod), 1),))


def _reduce_divisor(base: Index, div: Any, mod: Any) -> Index | None:
    """``(c*a + rest) // (c*k)`` as ``a // k`` when ``0 <= rest < c``.

    The smaller division often cancels against a modulo of the same variable (a reshape of a
    reshape), leaving the inner loop variable with coefficient 1, so the loop vectorises.
    """
    for _, c in base.terms:
        if c == 1 or not _sym.divisible(div, c):
            continue
        big = [(a, _sym.exact_quotient(k, c)) for a, k in base.terms if _sym.divisible(k, c)]
        parts = _split_const(base.const, c)
        if parts is None:
            continue
        rest = Index(tuple((a, k) for a, k in base.terms if not _sym.divisible(k, c)), parts[1])
        if _sym.provably_lt(rest.max_value(), c):
            return _divmod(_build(big, _sym.exact_quotient(parts[0], c)), _sym.exact_quotient(div, c), mod)
    return None


def _apply_mod(value: Index, mod: Any) -> Index:
    parts = _split_const(value.const, mod)
    if parts is None:
        return Index(((DivMod(value, 1, mod), 1),))
    kept = Index(tuple((a, c) for a, c in value.terms if not _sym.divisible(c, mod)), parts[1])
    if _sym.provably_lt(kept.max_value(), mod):
        return kept
    return Index(((DivMod(kept, 1, mod), 1),))


def flatten(indices: Sequence[Index], sizes: Sequence[Any]) -> Index:
    """The row-major flat offset of ``indices`` in a tensor of ``sizes``."""
    flat = Index()
    stride: Any = 1
    for idx, size in zip(reversed(indices), reversed(sizes)):
        flat = flat + idx * stride
        stride = _sym.norm(stride * size)
    return flat


def unflatten(flat: Index, sizes: Sequence[Any]) -> list[Index]:
    """The row-major multi-index of ``flat`` in a tensor of ``sizes``."""
    out: list[Index] = []
    if any(isinstance(s, int) and s == 0 for s in sizes):  # no elements: every index is unreachable
        return [Index() for _ in sizes]
    stride: Any = 1
    for size in reversed(sizes):
        out.append(Index() if size == 1 else _divmod(flat, stride, size))
        stride = _sym.norm(stride * size)
    return out[::-1]
