"""The code cache: per code object, the converted entries shared by every wrapper of that code.

An entry records what one conversion produced, independently of any
function object: the backend it was compiled for (BACKEND_MATCH), its guard
set, the code to run and the globals that code needs. Each wrapper turns the
entries into callables bound to its own function's globals and closure.
Caches are held weakly by code object, and cleared in place by ``reset()``
so wrappers that hold one see the change.
"""

from __future__ import annotations

import itertools
import types
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from dynajit.capture._symbolic.paths import reads_hooked
from dynajit.guards import GuardSet, weak_referents

__all__ = ["CacheEntry", "CodeCache", "all_caches", "cache_for"]

_compile_ids = itertools.count()
# How many live entries installed each name, per globals dict (by id: a module's dict cannot be weakly held).
_users: dict[int, dict[str, int]] = {}


@dataclass(eq=False)
class CacheEntry:
    """One conversion's result.

    ``kind`` is ``"compiled"`` (``code`` is the transformed code), ``"skip"``
    (nothing to compile: ``code`` is the original) or ``"eager"`` (conversion
    failed: the original runs, unguarded, and ``reason`` says why).
    """

    backend: Callable[..., Any]
    kind: str
    code: types.CodeType
    guards: Any = None
    graphs: list[Any] = field(default_factory=list)
    graph_breaks: list[Any] = field(default_factory=list)
    new_globals: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    compile_id: int = field(default_factory=lambda: next(_compile_ids))
    # Equal code objects share one cache, and one code object can run under several globals
    # (the same source exec'd twice, FunctionType(code, other_globals)): every globals dict an
    # entry runs under gets its names.
    installed_in: list[dict[str, Any]] = field(default_factory=list)
    # Weak references (with callbacks) to the objects the guards hold weakly: when one dies, the entry leaves
    # its cache, so what it holds (graphs, their parameters, the backend's code) is released with it.
    watchers: list[weakref.ref[Any]] = field(default_factory=list)
    # The shared table of name users (held here too: a watcher may fire while the interpreter exits).
    users: dict[int, dict[str, int]] = field(default_factory=lambda: _users, repr=False)

    def watch(self, cache: CodeCache) -> None:
        """Drop this entry from ``cache`` as soon as an object one of its guards holds weakly dies."""
        if not isinstance(self.guards, GuardSet):
            return  # unguarded (or a converter's own guard object, as in tests)
        entry = weakref.ref(self)

        def died(_: weakref.ref[Any]) -> None:
            alive = entry()
            if alive is not None:
                cache.discard(alive)

        for guard in self.guards:
            for ref in weak_referents(guard):
                referent = ref()
                if referent is not None:
                    self.watchers.append(weakref.ref(referent, died))

    def install_globals(self, f_globals: dict[str, Any]) -> None:
        """Put the names the transformed code reads into ``f_globals`` (once per globals dict)."""
        if any(target is f_globals for target in self.installed_in):
            return
        f_globals.update(self.new_globals)
        self.installed_in.append(f_globals)
        users = self.users.setdefault(id(f_globals), {})
        for name in self.new_globals:
            users[name] = users.get(name, 0) + 1

    def uninstall_globals(self) -> None:
        """Remove the installed names no other entry installed in the same globals uses (the helpers every
        break installs, ``__dynajit_intercept``, are shared) and that still hold this entry's values."""
        targets, self.installed_in = self.installed_in, []
        for target in targets:
            users = self.users.get(id(target), {})
            for name, value in self.new_globals.items():
                users[name] = users.get(name, 1) - 1
                if users[name] > 0:
                    continue
                del users[name]
                if target.get(name) is value:
                    del target[name]
            if not users:
                self.users.pop(id(target), None)


class TracedSizes:
    """The sizes each compile of one code object saw for the tensors it reached through attributes and items, and
    the ints it read there.

    Arguments' sizes are noted at every call (:meth:`CodeCache.note_sizes`); a tensor held by an object (a KV
    cache in ``self.keys``) is only reached while tracing, so its sizes are compared between compiles: a dim
    whose size differs from an earlier compile's is dynamic in every later one. So is an int read there whose value
    differs from an earlier compile's (a cache's length counter): it becomes a symbolic graph input.
    """

    def __init__(self) -> None:
        self.sizes: dict[str, tuple[int, ...]] = {}
        self.dynamic: dict[str, set[int]] = {}
        self.ints: dict[str, int] = {}
        self.dynamic_ints: set[str] = set()

    def note(self, name: str, size: tuple[int, ...]) -> set[int]:
        """Record ``size`` for the tensor at path ``name``; return its dims seen to change (so far)."""
        seen = self.sizes.setdefault(name, size)
        if len(seen) == len(size):
            changed = {d for d, (old, new) in enumerate(zip(seen, size)) if old != new}
            if changed:
                self.dynamic.setdefault(name, set()).update(changed)
        self.sizes[name] = size
        return self.dynamic.get(name, set())

    def note_int(self, name: str, value: int) -> bool:
        """Record ``value`` for the int at path ``name`` (a counter in ``self.steps``); whether it was seen to change."""
        if self.ints.setdefault(name, value) != value:
            self.dynamic_ints.add(name)
        return name in self.dynamic_ints

    def clear(self) -> None:
        self.sizes.clear()
        self.dynamic.clear()
        self.ints.clear()
        self.dynamic_ints.clear()


class CodeCache:
    """The entries of one code object, most recent first, and what recompilations learned about its inputs."""

    def __init__(self) -> None:
        self.entries: list[CacheEntry] = []
        self.version = 0
        self.limit_warned = False
        self.sizes_seen: dict[str, tuple[int, ...]] = {}
        self.dynamic_hints: dict[str, set[int]] = {}
        self.ints_seen: dict[str, int] = {}
        self.dynamic_ints: set[str] = set()
        self.traced_sizes = TracedSizes()

    def add(self, entry: CacheEntry) -> None:
        self.entries.insert(0, entry)
        self.version += 1

    def discard(self, entry: CacheEntry) -> None:
        """Remove ``entry`` (an object its guards relied on is gone: it can never run again)."""
        if any(kept is entry for kept in self.entries):
            self.entries = [kept for kept in self.entries if kept is not entry]
            self.version += 1
        entry.uninstall_globals()
        entry.watchers.clear()
        # A wrapper may hold the entry until its next miss rebuilds its chain (the entry's guards can no longer
        # pass): release the graphs and compiled code now, not then.
        entry.graphs.clear()
        entry.new_globals.clear()

    def clear(self) -> None:
        for entry in self.entries:
            entry.uninstall_globals()
        self.entries = []
        self.version += 1
        self.limit_warned = False
        self.sizes_seen.clear()
        self.dynamic_hints.clear()
        self.ints_seen.clear()
        self.dynamic_ints.clear()
        self.traced_sizes.clear()

    def note_sizes(self, names: Sequence[str], values: Sequence[Any]) -> dict[str, set[int]]:
        """Record the sizes of tensor arguments (and int arguments); what changed since an earlier compile is a hint."""
        for name, value in zip(names, values):
            if type(value) is int:
                if self.ints_seen.setdefault(name, value) != value:
                    self.dynamic_ints.add(name)
                continue
            if not issubclass(type(value), torch.Tensor) or reads_hooked(type(value)):
                continue  # (a tensor of a class with a Python __getattribute__ is not traced: nothing to hint)
            with torch._C.DisableTorchFunctionSubclass():  # a subclass's __torch_function__ would run on .shape
                if value.is_nested and value.layout == torch.strided:
                    continue  # (a strided nested tensor has no size: its components have theirs)
                size = tuple(value.shape)
            seen = self.sizes_seen.setdefault(name, size)
            if len(seen) == len(size):
                changed = {d for d, (old, new) in enumerate(zip(seen, size)) if old != new}
                if changed:
                    self.dynamic_hints.setdefault(name, set()).update(changed)
        return self.dynamic_hints


_caches: weakref.WeakKeyDictionary[types.CodeType, CodeCache] = weakref.WeakKeyDictionary()


def cache_for(code: types.CodeType) -> CodeCache:
    """The cache of ``code`` (created empty on first use)."""
    cache = _caches.get(code)
    if cache is None:
        cache = _caches[code] = CodeCache()
    return cache


def all_caches() -> list[CodeCache]:
    """Every live code cache."""
    return list(_caches.values())
