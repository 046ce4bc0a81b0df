"""The recompile limits of a code object's cache: when a new entry is one too many, and what the user is told.

``config.cache_size_limit`` counts the entries that would run for the same module arguments (each layer of a
stack of equal modules has its own budget, as in TorchDynamo); ``config.accumulated_cache_size_limit`` counts
every entry of the code object. Before refusing, entries no live wrapper's backend can reach are dropped.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from dynajit.capture import _cache
from dynajit.capture.config import config
from dynajit.guards import GuardSet, LocalSource, identity_of

__all__ = ["drop_unreachable_entries", "limit_reached", "limit_warning", "same_modules", "strict_limit_message"]


def same_modules(entry: _cache.CacheEntry, arguments: dict[str, Any]) -> bool:
    """Whether every module argument ``entry`` is guarded on by identity (``self``) is the same in ``arguments``.

    TorchDynamo counts its recompile limit per such identities too: each layer of a stack of equal modules
    compiles its own entry, and the limit still stops one layer's inputs recompiling without end. Modules
    only: a function or object made anew on every call (a closure live across a graph break) would otherwise
    be a new identity on every call, each compiling its own entry up to the accumulated limit.
    """
    for guard in entry.guards if isinstance(entry.guards, GuardSet) else ():
        if guard.kind == "NN_MODULE" and isinstance(guard.sources[0], LocalSource):
            name = guard.sources[0].local_name
            if name in arguments and identity_of(guard) is not arguments[name]:
                return False
    return True


def limit_reached(cache: _cache.CodeCache, names: Sequence[str], values: Sequence[Any]) -> str:
    """The limit (``config.<name> (<n>)``) a new entry of ``cache`` for ``values`` would pass, or ''."""
    entries = cache.entries
    if len(entries) >= config.accumulated_cache_size_limit:
        return f"config.accumulated_cache_size_limit ({config.accumulated_cache_size_limit})"
    arguments = dict(zip(names, values))
    same = sum(1 for entry in entries if same_modules(entry, arguments))
    return f"config.cache_size_limit ({config.cache_size_limit})" if same >= config.cache_size_limit else ""


def drop_unreachable_entries(
    cache: _cache.CodeCache, running: Callable[..., Any], collect: bool, live_backends: Callable[[], Iterable[Any]]
) -> bool:
    """Remove entries whose backend no live wrapper uses any more (they can never hit); True if any went.

    ``running`` is the backend of the wrapper asking (certainly live); ``live_backends`` lists the backends of
    the live wrappers. With ``collect``, garbage is collected first when some entry belongs to another
    backend, since dropped wrappers sit in reference cycles.
    """
    collect = collect and any(entry.backend is not running for entry in cache.entries)
    for attempt in range(2 if collect else 1):
        live = {id(backend) for backend in live_backends()}
        kept = [entry for entry in cache.entries if id(entry.backend) in live]
        if len(kept) < len(cache.entries):
            for entry in cache.entries:
                if id(entry.backend) not in live:
                    entry.uninstall_globals()
            cache.entries = kept
            cache.version += 1
            return True
        if collect and attempt == 0:
            gc.collect()  # wrappers form reference cycles: collect them before concluding nothing is dead
    return False


def limit_warning(qualname: str, where: str, limit: str, last_failure: str) -> str:
    """The warning for a function past ``limit``: what happens now and how to change it."""
    return (
        f"dynajit: function {qualname!r} ({where}) reached {limit} compiled entries; inputs that match none of "
        f"them now run eagerly, without compiling. Last guard failure: {last_failure}. To allow more entries, "
        f"raise the limit: dynajit.capture.config.cache_size_limit = N (or DYNAJIT_CACHE_SIZE_LIMIT=N); to see "
        f"why each recompile happened, enable the 'recompiles' log (DYNAJIT_LOGS=recompiles)."
    )


def strict_limit_message(qualname: str, where: str, limit: str, last_failure: str) -> str:
    """The strict-mode error for a function past ``limit``, which would otherwise run eagerly."""
    return (
        f"dynajit (strict mode): function {qualname!r} ({where}) reached {limit} compiled entries and would run "
        f"eagerly. Last guard failure: {last_failure}. Raise the limit "
        f"(dynajit.capture.config.cache_size_limit = N) or make the inputs match a compiled entry."
    )
