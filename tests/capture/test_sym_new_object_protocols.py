"""``==``/``!=``, ``hash()``, ``repr()``/``str()``/``ascii()``/``format()`` and f-strings of objects made inside
compiled code: Python methods (a user's, the ones dataclasses generate) are traced, object's identity equality
too; what object answers from the address (its hash and repr) is a graph break naming why. Differential."""

from __future__ import annotations

import dataclasses
import reprlib

import pytest

import dynajit.capture as capture


def break_reasons(check, fn, *args, **options):
    """Run the differential check; return the reasons of the graph breaks it met."""
    with capture.observe() as seen:
        check(fn, *args, **options)
    return [b.reason for frame in seen.frames for b in frame.graph_breaks]


class Plain:
    def __init__(self, v):
        self.v = v


class Valued:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        if not isinstance(other, Valued):
            return NotImplemented
        return self.v == other.v

    def __hash__(self):
        return self.v

    def __repr__(self):
        return f"Valued({self.v!r})"

    def __str__(self):
        return f"<{self.v}>"

    def __format__(self, spec):
        return format(self.v, spec) + "!"


class SubValued(Valued):
    def __eq__(self, other):  # reflected first when the left side is a Valued
        return "sub"


class NoHash:
    def __eq__(self, other):  # defining __eq__ alone sets __hash__ to None
        return True


@dataclasses.dataclass
class Pair:
    a: int
    b: str = "x"


@dataclasses.dataclass(frozen=True)
class Key:
    a: int
    b: tuple = (1, 2)


@dataclasses.dataclass
class Wrapper:
    inner: Pair
    note: str = "é"


@dataclasses.dataclass
class Linked:
    name: str
    next: object = None


class Guarded:
    def __init__(self, v):
        self.v = v
        self.me = self

    @reprlib.recursive_repr("<loop>")
    def __repr__(self):
        return f"Guarded({self.v}, {self.me!r})"


class BadRepr:
    def __repr__(self):
        return 42


class HashMinusOne:
    def __init__(self, h):
        self.h = h

    def __hash__(self):
        return self.h


# ----------------------------------------------------------------- == and !=


def eq_identity(x):
    p, q = Plain(1), Plain(1)
    return x + 1, p == p, p == q, p != q, p != p, p == 3, None != p, "s" == p  # noqa: E711 - == with None is the point


def eq_python(x):
    a, b, c = Valued(1), Valued(1), Valued(2)
    return x + 1, a == b, a != c, a != b, a == 1, 1 == a, a == Plain(1), SubValued(1) == a, a == SubValued(1)


def eq_dataclass(x):
    return x + 1, Pair(1) == Pair(1), Pair(1) != Pair(1, "y"), Pair(1) == Key(1), Key(2) == Key(2), Pair(1) == (1, "x")


class Elementwise:
    def __init__(self, t):
        self.t = t

    def __eq__(self, other):
        return self.t == other.t


def eq_returns_tensor(x):
    return Elementwise(x) == Elementwise(x * 0)


@pytest.mark.parametrize("fn", [eq_identity, eq_python, eq_dataclass, eq_returns_tensor], ids=lambda f: f.__name__)
def test_equality_of_new_objects_is_traced(check, t, fn):
    assert break_reasons(check, fn, t(3), graphs=1, fullgraph=True) == []


# ----------------------------------------------------------------- hash()


def hash_python(x):
    return x + 1, hash(Key(3)), hash(Key(3)) == hash(Key(3)), hash(Valued(7)), hash(Key(4, ("a", 2.5)))


def hash_reduced(x):
    return x + 1, hash(HashMinusOne(-1)), hash(HashMinusOne(2**64 + 5)), hash(HashMinusOne(-(2**63)))


@pytest.mark.parametrize("fn", [hash_python, hash_reduced], ids=lambda f: f.__name__)
def test_hash_through_a_python_hash_is_traced(check, t, fn):
    assert break_reasons(check, fn, t(3), graphs=1, fullgraph=True) == []


def hash_unhashable(x):
    y = x + 1
    return y, hash(NoHash())


def hash_unhashable_dataclass(x):
    y = x + 1
    return y, hash(Pair(1))


def hash_identity(x):
    p = Plain(x)
    y = x + 1
    return y, hash(p) == hash(p), p.v


# ----------------------------------------------------------------- repr(), str(), ascii(), format(), f-strings


def text_dataclass(x):
    p, w = Pair(3), Wrapper(Pair(1, "q"))
    return x + 1, repr(p), str(p), f"{p}", f"[{p!r:>20}]", repr(w), ascii(w), f"{w!a}", str(Key(1))


def text_python(x):
    v = Valued(2.5)
    return x + 1, repr(v), str(v), f"{v}", f"{v!r}", f"{v!s}", f"{v:.3f}", format(v, "e"), format(v)


def text_recursive(x):
    a = Linked("a")
    a.next = Linked("b", a)  # a cycle: dataclasses' repr shows "..." where it comes back
    g = Guarded(1)
    return x + 1, repr(a), repr(g), str(g)


@pytest.mark.parametrize("fn", [text_dataclass, text_python, text_recursive], ids=lambda f: f.__name__)
def test_text_of_new_objects_is_traced(check, t, fn):
    assert break_reasons(check, fn, t(3), graphs=1, fullgraph=True) == []


def text_bad_repr(x):
    y = x + 1
    return y, repr(BadRepr())


def text_format_spec_of_object(x):
    y = x + 1
    return y, f"{Pair(1)!r:>30}", f"{Plain(1):>5}"


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (hash_unhashable, "unhashable type: 'NoHash' (TypeError)"),
        (hash_unhashable_dataclass, "unhashable type: 'Pair' (TypeError)"),
        (text_bad_repr, "__repr__ returned non-string (type int) (TypeError)"),
        (text_format_spec_of_object, "unsupported format string passed to Plain.__format__ (TypeError)"),
    ],
    ids=lambda case: getattr(case, "__name__", ""),
)
def test_a_protocol_that_raises_raises_as_in_eager(check, t, fn, reason):
    assert break_reasons(check, fn, t(3), graphs=1) == [reason]


def text_default_repr(x):
    p = Plain(x)
    y = x + 1
    text = repr(p)
    return y, text.startswith("<") and "Plain object at 0x" in text, p.v


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (
            hash_identity,
            "hash() of a Plain object made while tracing is object.__hash__, taken from the address "
            "the object has only once it is built after the graph",
        ),
        (
            text_default_repr,
            "repr() of a Plain object made while tracing is object.__repr__, which shows the address "
            "the object has only once it is built after the graph",
        ),
    ],
    ids=lambda case: getattr(case, "__name__", ""),
)
def test_what_object_answers_from_the_address_is_a_break_naming_why(check, t, fn, reason):
    assert break_reasons(check, fn, t(3))[0] == reason  # then the rebuilt object runs it in Python


# ----------------------------------------------------------------- isinstance() and type()


def type_checks(x):
    p, s = Pair(1), SubValued(1)
    return (
        x + 1,
        isinstance(p, Pair),
        isinstance(s, Valued),
        isinstance(s, (Plain, Pair)),
        type(s) is SubValued,
        type(p).__name__,
        type(s).__mro__[1] is Valued,
    )


def test_isinstance_and_type_of_new_objects(check, t):
    assert break_reasons(check, type_checks, t(3), graphs=1, fullgraph=True) == []
