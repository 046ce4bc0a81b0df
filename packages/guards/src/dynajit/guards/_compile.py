"""Compile guards into one generated Python check function, plus a twin that explains the first failure.

The check function takes the guarded function's arguments positionally. Its
body is a flat list of ``if not (<check>): return False`` statements sorted by
cost class (stable, so each guard's own order is kept), with every source's
access expression assigned to a local right before its first use, so each
attribute chain or item lookup runs once. Constants live in the function's
globals under generated names. The whole body sits in one ``try``: a source
that cannot be reached (attribute gone, key missing, empty cell) makes the
check return ``False``, never raise.

Before emitting, each check's sources go through the shortcuts of
``_shortcuts`` (the same object reached along several paths is read below one
of them; a pinned module's members come from its tables).

The explaining twin runs the same expressions in the same order, one at a
time, and turns the first failure into the failing check's sentence.
"""

from __future__ import annotations

import builtins
import collections
import functools
import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import CellType
from typing import Any

from ._guard import Check, Guard
from ._native import machine_module, tensor_facts_module
from ._program import Program
from ._shortcuts import Rebaser, pinned_modules, representatives, shortcuts
from ._sources import Source

__all__ = ["CompiledGuards", "GuardCompileError", "compile_guards"]

machine_module()  # (starts building or loading the guard machine, so it is ready by the first guard set)
tensor_facts_module()

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


_LOCAL = re.compile(r"\b___v\d+\b")
_DEFINITION = re.compile(r"(___v\d+) = (.*)")


def _inline_single_uses(lines: list[str]) -> list[str]:
    """``lines`` with each local read only by the statement right after its definition computed in that statement.

    A model's guards read hundreds of attributes once each: a store and a load per value cost a tenth of the
    check. The value is still computed at the same point, between the same statements. (A name occurring
    inside a string literal counts as a use, so such a local is never inlined.)
    """
    uses = collections.Counter(name for line in lines for name in _LOCAL.findall(line))
    out: list[str] = []
    for line in lines:
        definition = _DEFINITION.fullmatch(out[-1]) if out else None
        if definition is not None and uses[definition[1]] == 2:
            name, expr = definition[1], definition[2]
            replaced = re.sub(rf"\b{name}\b", lambda _, expr=expr: f"({expr})", line, count=1)
            if replaced != line:
                out[-1] = replaced
                continue
        out.append(line)
    return out


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
        added, members = shortcuts(self.guards, pinned_modules(self.guards))
        checked = (*self.guards, *added)
        checks = _ordered_checks(checked)
        ctx = _Context(arg_names, f_globals, closure)
        emitter = _Emitter(ctx, None)
        emitted: set[str] = set()
        rebaser = Rebaser(representatives(checked), members)
        machine = machine_module()
        program = Program(ctx, arg_names) if machine is not None else None
        for check in checks:
            rebased = rebaser.check(check)
            expr = emitter.expression(rebased)
            if expr not in emitted:  # e.g. TYPE_MATCH and TENSOR_MATCH both checking type(x)
                emitted.add(expr)
                emitter.lines.append(f"if not ({expr}): return False")
                if program is not None:
                    program.add(rebased)
        self._check_lines, self._check_params = emitter.lines, tuple(ctx.params.values())
        self._namespace = ctx.namespace
        # The guard machine runs the same checks without the bytecode interpreter, several times faster; the
        # Python function (written and compiled at its first use) serves until the machine is built, and wherever
        # it cannot be.
        self.check: Callable[..., bool] = self.python_check if program is None else program.make(machine)
        self._checks = checks
        # The explaining twin too is written and compiled at its first use: it doubled the cost of guarding a
        # model's hundreds of parameters, for a failure to explain. Its reads give the values the checks read at
        # any time (a global not defined yet is read as Python would, whenever it is written).
        self._explainer_inputs = (arg_names, f_globals, closure)
        self._compiled_explainer: Callable[..., tuple[str, int, Any] | None] | None = None

    @functools.cached_property
    def code(self) -> str:
        """The Python check function's source."""
        return _function(_CHECK_NAME, self._check_params, _inline_single_uses(self._check_lines), "return True")

    @functools.cached_property
    def python_check(self) -> Callable[..., bool]:
        """The checks as a Python function (``check`` is the guard machine's, where it is built)."""
        exec(compile(self.code, f"<dynajit guards {id(self):#x}>", "exec"), self._namespace)
        return self._namespace[_CHECK_NAME]

    def _explain(self, *args: Any) -> tuple[str, int, Any] | None:
        if self._compiled_explainer is None:
            code, namespace, self._explained_sources = self._write_explainer(self._checks, *self._explainer_inputs)
            exec(compile(code, "<dynajit guard explanation>", "exec"), namespace)
            self._compiled_explainer = namespace[_EXPLAIN_NAME]
        return self._compiled_explainer(*args)

    @staticmethod
    def _write_explainer(
        checks: Sequence[Check], arg_names: Sequence[str], f_globals: Mapping[str, Any], closure: Mapping[str, CellType]
    ) -> tuple[str, dict[str, Any], list[Source]]:
        """The explaining twin's source and namespace, and the sources whose reads it numbers (for "cannot be
        reached")."""
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
        return code, ctx.namespace, emitter.sources

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
