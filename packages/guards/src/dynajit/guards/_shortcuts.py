"""Shortcuts for the compiled check: reads it may take along a shorter path than a guard's own.

One object is often reached along several paths: every layer of a model reaches the same class, and
through it that class's ``forward`` and the globals it reads. Every path the guards check to hold an
object (an identity guard, or an aliasing guard tying two paths) keeps its own check, but what is read
*below* such a path is read below one representative path to that object (the shortest), so those facts
are computed and checked once, not once per path. A module's members that ``nn.Module.__getattr__``
would answer (a Python call) are read from the module's tables instead, with a check that nothing shadows
them. Each shortcut reads what the full path would whenever the whole check passes: it passes only if
every identity and aliasing check does, and the checks added here hold when the guards are compiled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch

from ._guard import Check, Guard
from ._kinds import _IDENTITY_KINDS, dict_contains, id_match
from ._sources import AttrSource, BufferSource, InstanceAttrSource, ParamSource, Source, SubmoduleSource

__all__ = ["Rebaser", "pinned_modules", "representatives", "shortcuts"]


def representatives(guards: Sequence[Guard]) -> dict[Source, Source]:
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


def pinned_modules(guards: Sequence[Guard]) -> dict[Source, Any]:
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
    """The source kind reading ``module.<name>`` from its own table (the instance ``__dict__``, or the one of
    ``_parameters``, ``_buffers`` and ``_modules`` where ``nn.Module.__getattr__`` answers the read), with no
    class attribute of that name and the stock lookup, else None."""
    cls = type(module)
    if cls.__getattr__ is not torch.nn.Module.__getattr__ or cls.__getattribute__ is not object.__getattribute__:
        return None
    if any(name in vars(k) for k in cls.__mro__):
        return None
    if name in vars(module):
        return InstanceAttrSource
    for table, kind in _MODULE_TABLES:
        if name in vars(module).get(table, ()):
            return kind
    return None


def shortcuts(guards: Sequence[Guard], modules: Mapping[Source, Any]) -> tuple[list[Guard], dict[Source, type]]:
    """Checks added so that reads through pinned modules can take shortcuts, and the table reads they allow.

    - ``m.__class__`` of a pinned module ``m`` the guards read through (``m.__class__.forward``) gets an
      identity check, so every module of one class shares the reads below its class.
    - ``m.<name>`` answered by ``nn.Module.__getattr__`` (a Python call, about 1 µs) is read from the module's
      table (``m._modules[name]``, 80 ns), with a check that no instance attribute of that name appeared
      (what would take precedence); one the instance holds is read from its ``__dict__`` (a module's class
      has a ``__getattr__``, so each plain read looks the name up in its class twice). A class attribute
      added to a module class later is not seen, as in TorchDynamo's guards on module state.

    Each added check holds now, so adding it only narrows what passes; the identities are held weakly.
    """
    classes: dict[Source, Any] = {}
    members: dict[Source, type] = {}
    walked: set[Source] = set()  # (a model's guards share long prefixes: each is walked once)
    for guard in guards:
        for source in guard.sources:
            while source.base is not None and source not in walked:
                walked.add(source)
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
    added += [
        dict_contains(AttrSource(source.base, "__dict__"), source.attr, False)  # type: ignore[arg-type,attr-defined]
        for source, kind in members.items()
        if kind is not InstanceAttrSource
    ]
    return added, members


def _with_base(source: Source, base: Source) -> Source:
    """``source`` read from ``base`` instead of its own base (itself when it cannot say how)."""
    if not dataclasses.is_dataclass(source):
        return source
    for f in dataclasses.fields(source):
        if getattr(source, f.name) is source.base:
            return dataclasses.replace(source, **{f.name: base})  # type: ignore[type-var]
    return source


class Rebaser:
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
