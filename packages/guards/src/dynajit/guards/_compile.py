"""Compile guards into one generated Python check function, plus a twin that explains the first failure.

The check function takes the guarded function's arguments positionally. Its
body is a flat list of ``if not (<check>): return False`` statements sorted by
cost class (stable, so each guard's own order is kept), with every source's
access expression assigned to a local right before its first use, so each
attribute chain or item lookup runs once. Constants live in the function's
globals under generated names. The whole body sits in one ``try``: a source
that cannot be reached (attribute gone, key missing, empty cell) makes the
check return ``False``, never raise.

One object is often reached along several paths (every layer of a model
reaches the same class, and that class's ``forward`` and its globals). Each
path's own identity check is kept, but what is read *from* a path that is
checked to hold a given object is read from one representative path to that
object instead (the shortest), so the facts below it are computed and checked
once, not once per path. This is sound because the check passes only if every
identity and aliasing check passes, and then each path holds the object its
representative does.

The explaining twin runs the same expressions in the same order, one at a
time, and turns the first failure into the failing check's sentence.
"""

from __future__ import annotations

import builtins
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import CellType
from typing import Any, cast

import torch

from ._guard import Check, Guard
from ._kinds import dict_contains, id_match
from ._sources import AttrSource, BufferSource, ParamSource, Source, SubmoduleSource

__all__ = ["CompiledGuards", "GuardCompileError", "compile_guards"]

_CHECK_NAME = "___guard_check"
_EXPLAIN_NAME = "___guard_explain"


class GuardCompileError(ValueError):
    """A guard set cannot be compiled for the given function (a source it needs is not there)."""


class _Context:
    """Names for everything the generated code refers to: parameters, locals, bound constants."""

    def __init__(self, arg_names: Sequence[str], f_globals: Mapping[str, Any], closure: Mapping[str, CellType]) -> None:
        reserved = set(dir(builtins))
        self.params = {
            name: (f"___a{index}" if name in reserved or name.startswith("___") or not name.isidentifier() else name)
            for index, name in enumerate(arg_names)
        }
        self.f_globals = f_globals
        self.closure = closure
        self.namespace: dict[str, Any] = {"__builtins__": builtins}
        self._bound: dict[int, str] = {}
        self._counter = itertools.count()

    def bind(self, value: Any) -> str:
        name = self._bound.get(id(value))
        if name is None:
            name = f"___k{next(self._counter)}"
            self._bound[id(value)] = name
            self.namespace[name] = value
        return name

    def argument(self, name: str) -> str:
        if name not in self.params:
            raise GuardCompileError(
                f"a guard reads L[{name!r}], but the guarded function's arguments are {tuple(self.params)}; "
                "guards can only read arguments, globals and closure cells"
            )
        return self.params[name]

    def global_access(self, name: str) -> str:
        globals_name = self.bind(self.f_globals)
        if name in self.f_globals:
            return f"{globals_name}[{name!r}]"
        # Not a global now (a builtin, or not defined yet): read it the way Python would.
        builtins_dict = self.f_globals.get("__builtins__", builtins)
        builtins_dict = builtins_dict if isinstance(builtins_dict, dict) else vars(builtins_dict)
        return f"({globals_name}[{name!r}] if {name!r} in {globals_name} else {self.bind(builtins_dict)}[{name!r}])"

    def closure_cell(self, name: str) -> str:
        cell = self.closure.get(name)
        if cell is None:
            raise GuardCompileError(
                f"a guard reads closure variable {name!r}, but no cell for it was given; "
                f"pass closure={{name: cell}} built from fn.__code__.co_freevars and fn.__closure__"
            )
        return self.bind(cell)


class _Emitter:
    """Writes statements, computing each source's value into a local once, right before its first use."""

    def __init__(self, ctx: _Context, on_unreachable: Callable[[int], list[str]] | None) -> None:
        self.ctx = ctx
        self.locals: dict[Source, str] = {}
        self.lines: list[str] = []
        self.on_unreachable = on_unreachable
        self.sources: list[Source] = []

    def value(self, source: Source) -> str:
        known = self.locals.get(source)
        if known is not None:
            return known
        base = self.value(source.base) if source.base is not None else None
        expr = source.access(self.ctx, base)
        if expr.isidentifier():  # an argument: already a local
            self.locals[source] = expr
            return expr
        name = f"___v{len(self.locals)}"
        if self.on_unreachable is None:
            self.lines.append(f"{name} = {expr}")
        else:
            self.lines.append("try:")
            self.lines.append(f"    {name} = {expr}")
            self.lines.append("except Exception as ___e:")
            self.lines.extend(f"    {line}" for line in self.on_unreachable(len(self.sources)))
        self.sources.append(source)
        self.locals[source] = name
        return name

    def expression(self, check: Check) -> str:
        values = [self.value(source) for source in check.sources]
        return check.render(values, {key: self.ctx.bind(value) for key, value in check.constants.items()})


_IDENTITY_KINDS = ("ID_MATCH", "FUNCTION_MATCH", "NN_MODULE")  # keyed (kind, source, id(obj), ...)


def _representatives(guards: Sequence[Guard]) -> dict[Source, Source]:
    """Every source the guards check to be a given object (an identity guard, or the same object as another
    source), mapped to the shortest such source of that object."""
    parent: dict[Source, Source] = {}

    def find(source: Source) -> Source:
        while parent.setdefault(source, source) is not source:
            source = parent[source]
        return source

    def join(a: Source, b: Source) -> None:
        parent[find(a)] = find(b)

    by_object: dict[int, Source] = {}
    for guard in guards:
        key = cast(tuple, guard.key)
        if guard.kind in _IDENTITY_KINDS:
            first = by_object.setdefault(key[2], guard.sources[0])
            join(guard.sources[0], first)
        elif guard.kind == "TENSOR_ALIASING":
            same = key[1]
            for other in same[1:]:
                join(other, same[0])
    classes: dict[Source, list[Source]] = {}
    for source in parent:
        classes.setdefault(find(source), []).append(source)
    shortest = {root: min(members, key=lambda s: (len(s.name()), s.name())) for root, members in classes.items()}
    return {source: shortest[find(source)] for source in parent if shortest[find(source)] != source}


_MODULE_TABLES = (("_parameters", ParamSource), ("_buffers", BufferSource), ("_modules", SubmoduleSource))


def _pinned_modules(guards: Sequence[Guard]) -> dict[Source, Any]:
    """The module each NN_MODULE guard checks its source to be, by source (live ones only)."""
    modules: dict[Source, Any] = {}
    for guard in guards:
        if guard.kind == "NN_MODULE":
            constants = guard.checks[0].constants
            module = constants["ref"]() if "ref" in constants else constants.get("obj")
            if module is not None:
                modules[guard.sources[0]] = module
    return modules


def _table_member(module: Any, name: str) -> type[Source] | None:
    """The source kind reading ``module.<name>`` from its own table, when ``nn.Module.__getattr__`` is what
    answers that read (no instance attribute, no class attribute, the stock lookup), else None."""
    cls = type(module)
    if cls.__getattr__ is not torch.nn.Module.__getattr__ or cls.__getattribute__ is not object.__getattribute__:
        return None
    if name in vars(module) or any(name in vars(k) for k in cls.__mro__):
        return None
    for table, kind in _MODULE_TABLES:
        if name in vars(module).get(table, ()):
            return kind
    return None


def _shortcuts(guards: Sequence[Guard], modules: Mapping[Source, Any]) -> tuple[list[Guard], dict[Source, type]]:
    """Checks added so that reads through pinned modules can take shortcuts, and the table reads they allow.

    - ``m.__class__`` of a pinned module ``m`` the guards read through (``m.__class__.forward``) gets an
      identity check, so every module of one class shares the reads below its class.
    - ``m.<name>`` answered by ``nn.Module.__getattr__`` (a Python call, about 1 µs) is read from the module's
      table (``m._modules[name]``, 80 ns), with a check that no instance attribute of that name appeared
      (what would take precedence). A class attribute added to a module class later is not seen, as in
      TorchDynamo's guards on module state.

    Each added check holds now, so adding it only narrows what passes; the identities are held weakly.
    """
    classes: dict[Source, Any] = {}
    members: dict[Source, type] = {}
    for guard in guards:
        for source in guard.sources:
            while source.base is not None:
                module = modules.get(source.base)
                if isinstance(source, AttrSource) and module is not None:
                    if source.attr == "__class__":
                        cls = type(module)
                        # A class answering `__class__` itself (a property) would make the read differ from type().
                        if not any("__class__" in vars(k) for k in cls.__mro__[:-1]):
                            classes[source] = cls
                    else:
                        kind = _table_member(module, source.attr)
                        if kind is not None:
                            members[source] = kind
                source = source.base
    added = [id_match(source, cls, weak=True) for source, cls in classes.items()]
    added += [dict_contains(AttrSource(source.base, "__dict__"), source.attr, False) for source in members]  # type: ignore[arg-type,attr-defined]
    return added, members


def _with_base(source: Source, base: Source) -> Source:
    """``source`` read from ``base`` instead of its own base (itself when it cannot say how)."""
    if not dataclasses.is_dataclass(source):
        return source
    for f in dataclasses.fields(source):
        if getattr(source, f.name) is source.base:
            return dataclasses.replace(source, **{f.name: base})  # type: ignore[type-var]
    return source


class _Rebaser:
    """Rewrites a source so that every proper prefix of it pinned to an object goes through that object's
    representative path (the source itself keeps its own last step: its own check stays on its own path)."""

    def __init__(self, representatives: Mapping[Source, Source], members: Mapping[Source, type]) -> None:
        self.representatives = representatives
        self.members = members
        self.memo: dict[Source, Source] = {}

    def rebase(self, source: Source) -> Source:
        known = self.memo.get(source)
        if known is None:
            base = source.base
            if base is None:
                known = source
            elif source in self.members:
                known = self.members[source](self.canonical(base), source.attr)  # type: ignore[attr-defined,call-arg]
            else:
                known = _with_base(source, self.canonical(base))
            self.memo[source] = known
        return known

    def canonical(self, source: Source) -> Source:
        representative = self.representatives.get(source)
        return self.rebase(representative if representative is not None else source)

    def check(self, check: Check) -> Check:
        sources = tuple(self.rebase(s) for s in check.sources)
        return check if sources == check.sources else dataclasses.replace(check, sources=sources)


def _ordered_checks(guards: Iterable[Guard]) -> list[Check]:
    """All checks, cheapest first; a guard's checks never move before its earlier, cheaper ones."""
    keyed = []
    for guard_index, guard in enumerate(guards):
        floor = 0
        for check_index, check in enumerate(guard.checks):
            floor = max(floor, check.cost)
            keyed.append(((floor, guard_index, check_index), check))
    keyed.sort(key=lambda item: item[0])
    return [check for _, check in keyed]


def _function(name: str, params: Iterable[str], body: list[str], ending: str) -> str:
    header = f"def {name}({', '.join(params)}):"
    inner = "\n".join(f"        {line}" for line in body) or "        pass"
    return f"{header}\n    try:\n{inner}\n    except Exception:\n        return False\n    {ending}\n"


class CompiledGuards:
    """A guard set compiled for one function: ``check(*args)`` -> bool, ``failure_reason(*args)`` -> str | None."""

    def __init__(
        self,
        guards: Sequence[Guard],
        arg_names: Sequence[str],
        f_globals: Mapping[str, Any],
        closure: Mapping[str, CellType],
    ) -> None:
        self.guards = tuple(guards)
        self.arg_names = tuple(arg_names)
        added, members = _shortcuts(self.guards, _pinned_modules(self.guards))
        checked = (*self.guards, *added)
        checks = _ordered_checks(checked)
        ctx = _Context(arg_names, f_globals, closure)
        emitter = _Emitter(ctx, None)
        emitted: set[str] = set()
        rebaser = _Rebaser(_representatives(checked), members)
        for check in checks:
            expr = emitter.expression(rebaser.check(check))
            if expr not in emitted:  # e.g. TYPE_MATCH and TENSOR_MATCH both checking type(x)
                emitted.add(expr)
                emitter.lines.append(f"if not ({expr}): return False")
        self.code = _function(_CHECK_NAME, ctx.params.values(), emitter.lines, "return True")
        namespace = ctx.namespace
        exec(compile(self.code, f"<dynajit guards {id(self):#x}>", "exec"), namespace)
        self.check: Callable[..., bool] = namespace[_CHECK_NAME]
        self._checks = checks
        self._explain, self._explained_sources = self._build_explainer(checks, arg_names, f_globals, closure)

    @staticmethod
    def _build_explainer(
        checks: Sequence[Check], arg_names: Sequence[str], f_globals: Mapping[str, Any], closure: Mapping[str, CellType]
    ) -> tuple[Callable[..., tuple[str, int, Any] | None], list[Source]]:
        """The explaining twin, and the sources whose reads it numbers (for "cannot be reached")."""
        ctx = _Context(arg_names, f_globals, closure)
        emitter = _Emitter(ctx, lambda index: [f"return ('unreachable', {index}, ___e)"])
        for index, check in enumerate(checks):
            expr = emitter.expression(check)
            values = "".join(f"{emitter.locals[source]}, " for source in check.sources)
            emitter.lines += [
                "try:",
                f"    ___ok = {expr}",
                "except Exception as ___e:",
                f"    return ('raised', {index}, ___e)",
                f"if not ___ok: return ('failed', {index}, ({values}))",
            ]
        body = "\n".join(f"    {line}" for line in emitter.lines)
        code = f"def {_EXPLAIN_NAME}({', '.join(ctx.params.values())}):\n{body}\n    return None\n"
        namespace = ctx.namespace
        exec(compile(code, "<dynajit guard explanation>", "exec"), namespace)
        return namespace[_EXPLAIN_NAME], emitter.sources

    def failure_reason(self, *args: Any) -> str | None:
        """The first failing guard as a sentence (``L['x'] dtype: expected float32, got float64``), or None."""
        outcome = self._explain(*args)
        if outcome is None:
            return None
        what, index, payload = outcome
        if what == "unreachable":
            source = self._explained_sources[index]
            return f"{source.name()} cannot be reached: {type(payload).__name__}: {payload}"
        check = self._checks[index]
        if what == "raised":
            return f"{check.readable()} raised {type(payload).__name__}: {payload}"
        try:
            return check.explain(payload)
        except Exception as error:  # the value is too odd for the sentence: say which check failed
            return f"{check.readable()} is false ({type(error).__name__} while describing it)"

    def __call__(self, *args: Any) -> bool:
        return self.check(*args)

    def __repr__(self) -> str:
        return f"<CompiledGuards of {len(self.guards)} guards over {self.arg_names}>"


def compile_guards(
    guards: Sequence[Guard],
    arg_names: Sequence[str],
    f_globals: Mapping[str, Any],
    closure: Mapping[str, CellType] | None = None,
) -> CompiledGuards:
    """Compile ``guards`` for a function with arguments ``arg_names`` (positional, in order)."""
    if isinstance(arg_names, str):
        raise TypeError(
            f"arg_names must be a sequence of names, got the string {arg_names!r}; wrap it: ({arg_names!r},)"
        )
    return CompiledGuards(guards, arg_names, f_globals, dict(closure or {}))
