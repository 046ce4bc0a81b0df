"""The runtime: ``optimize`` wrappers, their generated dispatchers, recompilation, interception and ``reset``.

A wrapper is a generated function with the compiled function's own
signature (see ``_dispatch``). It records which compile settings are running
(for BACKEND_MATCH guards and for interception), tries the cached entries'
guards most recent first and calls the hit. On a miss it converts the frame
(``_convert.convert_frame``), caches the entry in the code object's cache
(``_cache``), regenerates its chain and runs the new entry.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import logging
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch
from torch.nn.modules import module as module_globals
from torch.utils._device import DeviceContext

from dynajit.capture import _cache, _cache_limits, _dispatch, _marks, _observe, _stance
from dynajit.capture._errors import InternalCompilerError, RecompileError, RecompileLimitWarning, StrictModeError
from dynajit.capture._skipfiles import RESUME_MARK, is_library_code, is_untraceable_code
from dynajit.capture._symbolic.paths import reads_hooked
from dynajit.capture.config import config
from dynajit.fxgraph import artifact_enabled, artifact_logger, full_collections_deferred
from dynajit.guards import GuardSet

__all__ = [
    "CompiledFunction",
    "InternalCompilerError",
    "RecompileError",
    "RecompileLimitWarning",
    "StrictModeError",
    "current_backend",
    "intercept",
    "optimize",
    "original_of",
    "optimize_assert",
    "reset",
]

_guards_log = artifact_logger("guards")
_recompiles_log = artifact_logger("recompiles")
_log = logging.getLogger("dynajit.capture")


# The settings of the compiled function running in this thread (or asyncio task): a context variable,
# the cheapest per-thread state to set and restore around every call.
_running: contextvars.ContextVar[_Settings | None] = contextvars.ContextVar("dynajit_running", default=None)
_running_settings = _running.get
_lock = threading.RLock()
_live: weakref.WeakSet[CompiledFunction] = weakref.WeakSet()
# The wrappers optimize() returned: their backends are the ones whose entries can still run. (Interception
# wrappers do not count: entries keep theirs alive through the globals they install.)
_public: weakref.WeakSet[CompiledFunction] = weakref.WeakSet()


def _live_backends() -> list[Callable[..., Any]]:
    return [compiled.settings.backend for compiled in _public]


def current_backend() -> Callable[..., Any] | None:
    """The backend of the compiled function running on this thread (None outside compiled code).

    The BACKEND_MATCH guard compares it with the backend an entry was compiled for.
    """
    settings = _running_settings()
    return None if settings is None else settings.backend


def _where(code: types.CodeType) -> str:
    return f"{code.co_filename}:{code.co_firstlineno}"


_MISSING = object()


class _FunctionTable:
    """function -> value by identity, forgetting a function when it dies; a lookup is one dict get."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[weakref.ref[types.FunctionType], Any]] = {}

    def get(self, fn: types.FunctionType) -> Any:
        item = self._items.get(id(fn))
        return item[1] if item is not None and item[0]() is fn else _MISSING

    def set(self, fn: types.FunctionType, value: Any) -> None:
        key, items = id(fn), self._items

        def forget(ref: weakref.ref[types.FunctionType]) -> None:
            if items.get(key, (None,))[0] is ref:
                del items[key]

        items[key] = (weakref.ref(fn, forget), value)

    def clear(self) -> None:
        self._items.clear()


# How interception treats instances of a type other than functions and methods: _MODULE, the class's
# Python __call__ function, or None (returned unchanged). Decided once per type.
_MODULE = object()
_PARTIAL = object()
_type_kinds: dict[type, Any] = {}


def _kind_of(kind: type) -> Any:
    decided = _type_kinds.get(kind, _MISSING)
    if decided is _MISSING:
        call = next((vars(klass)["__call__"] for klass in kind.__mro__ if "__call__" in vars(klass)), None)
        if issubclass(kind, torch.nn.Module) and call is torch.nn.Module.__call__:
            # (a module class with a Python __getattribute__ is not traced: its own __call__ runs, reads and all)
            decided = None if reads_hooked(kind) else _MODULE
        elif issubclass(kind, functools.partial):
            decided = _PARTIAL
        else:
            decided = call if type(call) is types.FunctionType else None  # classes get type's C __call__
        _type_kinds[kind] = decided
    return decided


_GLOBAL_MODULE_HOOKS = tuple(
    getattr(module_globals, name)
    for name in (
        "_global_forward_hooks",
        "_global_forward_pre_hooks",
        "_global_backward_hooks",
        "_global_backward_pre_hooks",
    )
    if hasattr(module_globals, name)
)


def _has_hooks(module: torch.nn.Module) -> bool:
    """True when calling ``module`` would run hooks (its own or global ones) around ``forward``."""
    own = module.__dict__
    return bool(
        own.get("_forward_hooks")
        or own.get("_forward_pre_hooks")
        or own.get("_backward_hooks")
        or own.get("_backward_pre_hooks")
        or any(_GLOBAL_MODULE_HOOKS)
    )


class _Settings:
    """One combination of compile settings; the interceptor of the frames compiled with it."""

    def __init__(self, backend: Callable[..., Any], fullgraph: bool, dynamic: bool | None) -> None:
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        # user function -> its compiled wrapper (None: leave it alone); weak, so dropped closures do not pile up
        self.intercepted = _FunctionTable()

    def wrapper_of(self, fn: types.FunctionType) -> Callable[..., Any]:
        """``fn``'s compiled wrapper under these settings, or ``fn`` when interception leaves it alone."""
        compiled = self.intercepted.get(fn)
        if compiled is _MISSING:
            compiled = self._decide(fn)
            self.intercepted.set(fn, compiled)
        return fn if compiled is None else compiled.wrapper

    def _decide(self, fn: types.FunctionType) -> CompiledFunction | None:
        code = fn.__code__
        if (
            _marks.is_disabled(fn)
            or "_dynajit_compiled" in fn.__dict__
            # A resume function continues a frame that is being compiled, whatever file its code comes from.
            or (is_library_code(code) and RESUME_MARK not in fn.__dict__)
            or is_untraceable_code(code)
            # A 3.11 comprehension takes its iterator as ".0", which no generated signature can name: it runs as is.
            or not all(name.isidentifier() for name in _dispatch.layout_of(code).names)
        ):
            return None
        return CompiledFunction(_detached_copy(fn), self)

    def intercept(self, obj: Any) -> Any:
        kind = type(obj)
        if kind is types.FunctionType:
            return self.wrapper_of(obj)
        if kind is types.MethodType:
            return self._bind(obj.__func__, obj.__self__, obj)
        how = _kind_of(kind)
        if how is None:
            return obj
        if how is _MODULE:
            return self._intercept_module(obj)
        if how is _PARTIAL:
            func = self.intercept(obj.func)
            return obj if func is obj.func else functools.partial(func, *obj.args, **obj.keywords)
        return self._bind(how, obj, obj)

    def _bind(self, func: Any, self_: Any, unchanged: Any) -> Any:
        """``func``'s wrapper bound to ``self_``, or ``unchanged`` when ``func`` is left alone."""
        if type(func) is not types.FunctionType:
            return unchanged
        wrapper = self.wrapper_of(func)
        return unchanged if wrapper is func else types.MethodType(wrapper, self_)

    def _intercept_module(self, module: torch.nn.Module) -> Any:
        if _has_hooks(module) or _marks.is_disabled(module):
            return module
        forward = module.__dict__.get("forward")
        if forward is not None:  # a forward set on the instance
            compiled = self.intercept(forward)
            return module if compiled is forward else compiled
        # (read statically: a TorchScript module's class answers ``forward`` through a descriptor that raises)
        return self._bind(inspect.getattr_static(type(module), "forward", None), module, module)


def _detached_copy(fn: types.FunctionType) -> types.FunctionType:
    """A function equal to ``fn`` (same code, globals, closure, defaults) that does not keep ``fn`` alive."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__dict__.update(fn.__dict__)
    return copy


# Settings are shared while some wrapper uses them.
_settings_table: weakref.WeakValueDictionary[tuple[Any, bool, bool | None], _Settings] = weakref.WeakValueDictionary()


def _settings(backend: Callable[..., Any], fullgraph: bool, dynamic: bool | None) -> _Settings:
    key = (backend, fullgraph, dynamic)
    try:
        settings = _settings_table.get(key)
        shareable = True
    except TypeError:  # an unhashable backend object: its settings are not shared
        settings, shareable = None, False
    if settings is None:
        settings = _Settings(backend, fullgraph, dynamic)
        if shareable:
            _settings_table[key] = settings
    return settings


def original_of(obj: Any) -> Any | None:
    """The user function behind a compiled wrapper (bound again for a compiled method), or None.

    The interpreter uses it to inline a call to a compiled function instead of breaking the graph on it.
    """
    target = obj.__func__ if type(obj) is types.MethodType else obj
    compiled = getattr(target, "__dict__", {}).get("_dynajit_compiled") if type(target) is types.FunctionType else None
    if compiled is None:
        return None
    return types.MethodType(compiled.fn, obj.__self__) if target is not obj else compiled.fn


def intercept(obj: Any) -> Any:
    """Route a call made by compiled code: ``obj``'s compiled wrapper, or ``obj`` itself.

    Under the settings (backend, fullgraph, dynamic) of the compiled function
    running on this thread, a user Python function or bound method gets its
    compiled wrapper (cached, so repeated interception is cheap). Builtins, C
    functions, torch / dynajit / standard-library functions, generators and
    coroutines, disabled functions, classes and other callables are returned
    unchanged. An ``nn.Module`` instance without hooks gets its compiled
    ``forward``; a module with hooks (its own or global ones) is returned
    unchanged, so the hooks run and its ``forward`` runs eagerly. Another
    object whose class defines ``__call__`` in Python (a module overriding
    ``__call__`` included) gets that method compiled and bound to it; a
    ``functools.partial`` gets its function intercepted. Outside compiled
    code, every object is returned unchanged.
    """
    settings = _running_settings()
    return obj if settings is None else settings.intercept(obj)


class _Instance:
    """A cache entry bound to one function: its compiled guard check, the function to run, and whether that
    function needs the running settings (``scoped``)."""

    __slots__ = ("check", "guards", "run", "scoped")

    def __init__(self, check: Callable[..., bool] | None, guards: Any, run: Callable[..., Any], scoped: bool) -> None:
        self.check = check
        self.guards = guards
        self.run = run
        self.scoped = scoped


def _without_backend_match(guards: Any) -> Any:
    """``guards`` minus BACKEND_MATCH: a dispatcher's chain holds only its own backend's entries, so the check
    always passes there (and it would need the running settings set before every guard check)."""
    if not isinstance(guards, GuardSet):
        return guards
    return GuardSet(guard for guard in guards if guard.kind != "BACKEND_MATCH")


def _needs_settings(entry: _cache.CacheEntry) -> bool:
    """Whether running ``entry`` may reach the interceptor (or other readers of the running settings).

    Transformed code that names nothing but its compiled graphs (no other global, attribute or method) can
    only call those graphs; anything else (a graph break's Python, resume functions, side effects) is scoped.
    """
    if entry.kind != "compiled":
        return False  # the original code runs: its calls are not intercepted
    graph_names = {graph.name for graph in entry.graphs}
    return bool(entry.graph_breaks) or not set(entry.code.co_names) <= graph_names


class CompiledFunction:
    """The runtime state behind one wrapper: its function, settings, code cache and generated dispatcher."""

    def __init__(self, fn: types.FunctionType, settings: _Settings) -> None:
        self.fn = fn
        self.settings = settings
        self.namespace: dict[str, Any] = {}
        self._bind_code()
        self.filename = f"<dynajit dispatcher of {fn.__qualname__}>"
        self.wrapper = self._compile(
            _dispatch.passthrough_source("dispatch", self.layout, self.prefix + "orig", self.reads)
        )
        self.wrapper.__defaults__, self.wrapper.__kwdefaults__ = _dispatch.marked_defaults(fn)
        self.wrapper._dynajit_compiled = self  # type: ignore[attr-defined]
        _live.add(self)
        self.regenerate()

    def _bind_code(self) -> None:
        """Take the function's code as it is now: its cache, its parameters and the dispatcher's names (the
        namespace dict is updated in place: it is the wrapper's globals)."""
        fn = self.fn
        self.code = fn.__code__
        self.cache = _cache.cache_for(self.code)
        self.layout = _dispatch.layout_of(self.code)
        self.prefix = _dispatch.internal_prefix(self.layout)
        self.instances: dict[_cache.CacheEntry, _Instance] = {}
        self.ordered: list[tuple[_cache.CacheEntry, _Instance]] = []
        self.rejected: set[_cache.CacheEntry] = set()
        self.version = -1
        self.namespace.clear()
        self.namespace.update({
            "__builtins__": __builtins__,
            self.prefix + "enter": _running.set,
            self.prefix + "leave": _running.reset,
            self.prefix + "settings": self.settings,
            self.prefix + "miss": self.miss,
            self.prefix + "orig": fn,
            self.prefix + "unset": _dispatch.UNSET,
            self.prefix + "code": self.code,
            self.prefix + "recode": self.recode,
        })  # fmt: skip
        # Parameters not passed are given fn's defaults as they are at each call (they may be replaced later).
        self.reads = _dispatch.default_reads(fn, self.layout, self.prefix + "unset", self.prefix + "orig")

    def recode(self, *args: Any, **kwargs: Any) -> Any:
        """A call after ``fn.__code__`` was replaced: eager runs the new code, so the dispatcher is rebuilt for
        it (its own cache, guards and signature) and the call goes through it."""
        with _lock:
            if self.fn.__code__ is not self.code:
                self._bind_code()
                self.wrapper.__defaults__, self.wrapper.__kwdefaults__ = _dispatch.marked_defaults(self.fn)
                self.regenerate()
        # (a parameter the caller left to its default was forwarded as the marker: the new code's defaults apply)
        while args and args[-1] is _dispatch.UNSET:
            args = args[:-1]
        return self.wrapper(*args, **{k: v for k, v in kwargs.items() if v is not _dispatch.UNSET})

    def _compile(self, source: str) -> types.FunctionType:
        function = _dispatch.compile_function(source, "dispatch", self.namespace, self.filename)
        _dispatch.take_name(function, self.fn)
        return function

    def _instantiate(self, entry: _cache.CacheEntry) -> _Instance:
        fn = self.fn
        if entry.kind == "compiled":
            run: Callable[..., Any] = types.FunctionType(
                entry.code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
            )
            run.__kwdefaults__ = fn.__kwdefaults__
            run.__qualname__ = fn.__qualname__
        else:
            run = fn
        scoped = _needs_settings(entry)
        if entry.guards is None:
            instance = _Instance(None, None, run, scoped)
        else:
            closure = dict(zip(self.code.co_freevars, (cell for cell in fn.__closure__ or ())))
            guards = _without_backend_match(entry.guards)
            compiled = guards.compile(arg_names=self.layout.names, f_globals=fn.__globals__, closure=closure)
            instance = _Instance(compiled.check, compiled, run, scoped)
        if entry.installed_in and entry.kind == "compiled":  # adopted under other globals: give them its names
            entry.install_globals(fn.__globals__)
        return instance

    def _usable(self, entry: _cache.CacheEntry) -> bool:
        """Entries of this backend; under fullgraph, not those with graph breaks or that fell back to eager."""
        if entry.backend is not self.settings.backend:
            return False
        return not self.settings.fullgraph or (entry.kind != "eager" and not entry.graph_breaks)

    def _adopt(self, entry: _cache.CacheEntry) -> _Instance | None:
        """Bind an entry another wrapper of this code created; None when it is not for this wrapper (or fails)."""
        if not self._usable(entry) or entry in self.rejected:
            return None
        try:
            return self._instantiate(entry)
        except Exception as error:  # a dynajit bug: this wrapper does without the entry rather than fail the call
            self.rejected.add(entry)
            warnings.warn(
                f"dynajit: cannot reuse compiled entry {entry.compile_id} of {self.fn.__qualname__!r} for this "
                f"function object ({type(error).__name__}: {error}); it compiles its own",
                RuntimeWarning,
                stacklevel=2,
            )
            return None

    def regenerate(self) -> None:
        """Rebuild the dispatcher's chain from the code cache (and the stance) into the same function object."""
        with _lock:
            self.version = self.cache.version
            instances = {}
            for entry in self.cache.entries:
                instance = self.instances.get(entry) or self._adopt(entry)
                if instance is not None:
                    instances[entry] = instance
            self.instances = instances
            self.ordered = list(instances.items())
            for name in [name for name in self.namespace if name.startswith((self.prefix + "g", self.prefix + "f"))]:
                del self.namespace[name]
            if _stance.current_stance() == "force_eager":
                source = _dispatch.passthrough_source("dispatch", self.layout, self.prefix + "orig", self.reads)
            else:
                branches = []
                for index, (_, instance) in enumerate(self.ordered):
                    check = None if instance.check is None else f"{self.prefix}g{index}"
                    if check is not None:
                        self.namespace[check] = instance.check
                    self.namespace[f"{self.prefix}f{index}"] = instance.run
                    branches.append(_dispatch.Branch(check, f"{self.prefix}f{index}", instance.scoped))
                stale = f"{self.prefix}orig.__code__ is not {self.prefix}code"
                source = _dispatch.dispatcher_source("dispatch", self.layout, self.prefix, branches, self.reads, stale)
            self.wrapper.__code__ = self._compile(source).__code__
            self.source = source

    # ------------------------------------------------------------ the miss path

    def miss(self, *values: Any) -> Any:
        """No entry's guards passed: reuse entries added by other wrappers, else recompile (or run eagerly)."""
        if self.version != self.cache.version:
            self.regenerate()
            for _, instance in self.ordered:
                if instance.check is None or instance.check(*values):
                    return _dispatch.call_with_values(instance.run, self.layout, values)
        run = self._recompile(values)
        return _dispatch.call_with_values(run, self.layout, values)

    def _recompile(self, values: Sequence[Any]) -> Callable[..., Any]:
        if _marks.compiling_state().compiling:
            # called while a frame converts on this thread (a backend running user code): never convert
            # recursively, run the function as it is
            return self.fn
        if _under_a_mode():
            # (The entries' GLOBAL_STATE guards count the modes: each call under one comes here.)
            return self.fn
        stance = _stance.current_stance()
        if self.ordered and stance == "eager_on_recompile":
            return self.fn
        if self.ordered and stance == "fail_on_recompile":
            raise RecompileError(
                f"function {self.fn.__qualname__!r} ({_where(self.code)}) needs a recompile while the stance is "
                f"'fail_on_recompile': {self._failure_reasons(values)[0]}. Use set_stance('default') to allow it."
            )
        observed = _observe.active()
        with _lock:
            limit = _cache_limits.limit_reached(self.cache, self.layout.names, values)
            if limit and not (
                _cache_limits.drop_unreachable_entries(
                    self.cache, self.settings.backend, not self.cache.limit_warned, _live_backends
                )
                and not _cache_limits.limit_reached(self.cache, self.layout.names, values)
            ):
                self._refuse_past_limit(values, limit, observed)
                if observed:
                    failures = tuple(self._failure_reasons(values))
                    reason = f"{limit} reached"
                    _observe.notify(self._record("cache_limit", recompile_reasons=failures, reason=reason))
                return self.fn
            reasons = (
                self._failure_reasons(values) if self.ordered and (observed or artifact_enabled("recompiles")) else []
            )
            if reasons and artifact_enabled("recompiles"):
                _recompiles_log.info(
                    "Recompiling function %s in %s\n    triggered by the following guard failure(s):\n%s",
                    self.fn.__qualname__,
                    _where(self.code),
                    "\n".join(f"    - {reason}" for reason in reasons),
                )
            start = time.perf_counter()
            entry, instance = self._convert(values, tuple(reasons))
            self.cache.add(entry)
            entry.watch(self.cache)  # a module (or other object) guarded by identity dies: the entry goes
            self.instances[entry] = instance
            self.regenerate()
        if observed:
            _observe.notify(self._entry_record(entry, tuple(reasons), time.perf_counter() - start))
        return instance.run

    def _record(self, kind: str, **details: Any) -> _observe.FrameRecord:
        return _observe.FrameRecord(code=self.code, name=self.fn.__qualname__, kind=kind, **details)

    def _entry_record(self, entry: _cache.CacheEntry, reasons: tuple[str, ...], seconds: float) -> Any:
        return self._record(
            entry.kind,
            graphs=tuple(entry.graphs),
            graph_breaks=tuple(entry.graph_breaks),
            guards=entry.guards,
            recompile_reasons=reasons,
            reason=entry.reason,
            compile_id=entry.compile_id,
            seconds=seconds,
        )

    def _failure_reasons(self, values: Sequence[Any]) -> list[str]:
        reasons = []
        for entry, instance in self.ordered:
            reason = None if instance.guards is None else instance.guards.failure_reason(*values)
            reasons.append(f"{entry.compile_id}: {reason or 'guards failed'}")
        return reasons or ["no compiled entry"]

    def _refuse_past_limit(self, values: Sequence[Any], limit: str, observed: bool) -> None:
        """Tell the user a new entry is past ``limit``: a warning once, or under ``config.strict`` an error."""
        if config.strict:
            failures = tuple(self._failure_reasons(values))
            message = _cache_limits.strict_limit_message(self.fn.__qualname__, _where(self.code), limit, failures[0])
            if observed:
                _observe.notify(self._record("error", recompile_reasons=failures, reason=message))
            raise StrictModeError(message)
        if not self.cache.limit_warned:  # the guards' explanations are costly: once per code object
            self.cache.limit_warned = True
            last = self._failure_reasons(values)[0]
            message = _cache_limits.limit_warning(self.fn.__qualname__, _where(self.code), limit, last)
            warnings.warn(message, RecompileLimitWarning, stacklevel=5)

    def _context(self) -> Any:
        from dynajit.capture._frame import FrameContext

        settings = self.settings
        hints: dict[str, set[int]] = {}
        ints: set[str] = set()
        automatic = config.automatic_dynamic_shapes and settings.dynamic is not False
        if automatic:
            hints = {name: set(dims) for name, dims in self.cache.dynamic_hints.items()}
            ints = set(self.cache.dynamic_ints) if not config.specialize_int else set()
        dynamic = settings.dynamic
        if dynamic is None and not config.assume_static_by_default:
            dynamic = True
        return FrameContext(
            backend=settings.backend,
            fullgraph=settings.fullgraph,
            dynamic=dynamic,
            intercept=intercept,
            dynamic_hints=hints,
            dynamic_ints=ints,
            traced_sizes=self.cache.traced_sizes if automatic else None,
        )

    @full_collections_deferred()
    def _convert(self, values: Sequence[Any], reasons: tuple[str, ...]) -> tuple[_cache.CacheEntry, _Instance]:
        from dynajit.capture import _convert
        from dynajit.capture._frame import GraphBreak, SkipFrame, Unsupported
        from dynajit.capture._symbolic.shapes import DynamicShapeError

        backend = self.settings.backend
        self.cache.note_sizes(self.layout.names, values)
        try:
            with _marks.compiling():
                converted = _convert.convert_frame(self.fn, tuple(values), self._context())
            entry = _cache.CacheEntry(
                backend,
                "compiled",
                converted.code,
                converted.guards,
                list(converted.graphs),
                list(converted.graph_breaks),
                dict(converted.new_globals),
            )
            instance = self._instantiate(entry)
            self._log_guards(entry)
            entry.install_globals(self.fn.__globals__)  # last: nothing is installed for an entry that failed
        except SkipFrame as skip:
            entry = _cache.CacheEntry(backend, "skip", self.code, skip.guards, reason=skip.reason)
            instance = self._instantiate(entry)
        except Unsupported as unsupported:
            if self.settings.fullgraph:
                if _observe.active():
                    graph_break = GraphBreak(unsupported.reason, tuple(unsupported.user_stack))
                    record = self._record(
                        "error", graph_breaks=(graph_break,), recompile_reasons=reasons, reason=str(unsupported)
                    )
                    _observe.notify(record)
                raise
            # without fullgraph the converter handles graph breaks itself: reaching here is a dynajit bug
            entry = self._eager_entry(unsupported, reasons)
            instance = self._instantiate(entry)
        except DynamicShapeError:
            raise  # the user's mark_dynamic contradicts the input or the program: theirs to fix, never eager
        except Exception as error:
            if self.settings.fullgraph and not config.suppress_errors:
                message = (
                    f"dynajit failed to convert {self.fn.__qualname__!r} ({_where(self.code)}): "
                    f"{type(error).__name__}: {error}"
                )
                self._raise_recorded(InternalCompilerError(message), error, reasons)
            entry = self._eager_entry(error, reasons)
            instance = self._instantiate(entry)
        return entry, instance

    def _raise_recorded(self, raised: Exception, cause: Exception, reasons: tuple[str, ...]) -> NoReturn:
        """Raise ``raised`` (chained to ``cause``), first giving an open ``observe()`` block its error record."""
        if _observe.active():
            _observe.notify(self._record("error", recompile_reasons=reasons, reason=str(raised)))
        raise raised from cause

    def _eager_entry(self, error: Exception, reasons: tuple[str, ...]) -> _cache.CacheEntry:
        """The entry running the frame eagerly after ``error``; under ``config.strict``, StrictModeError instead."""
        reason = f"{type(error).__name__}: {error}"
        if config.strict:
            message = (
                f"dynajit (strict mode): compiling {self.fn.__qualname__!r} ({_where(self.code)}) failed and it "
                f"would run eagerly: {reason}"
            )
            self._raise_recorded(StrictModeError(message), error, reasons)
        warnings.warn(
            f"dynajit: compiling {self.fn.__qualname__!r} ({_where(self.code)}) failed ({reason}): an internal "
            "error or a failure of the backend compiler. It runs eagerly from now on for this backend. Set "
            "dynajit.capture.config.verbose = True for the traceback, and please report it if it is dynajit's.",
            RuntimeWarning,
            stacklevel=5,
        )
        if config.verbose:
            _log.warning("conversion of %s failed", self.fn.__qualname__, exc_info=error)
        return _cache.CacheEntry(self.settings.backend, "eager", self.code, reason=reason)

    def _log_guards(self, entry: _cache.CacheEntry) -> None:
        if artifact_enabled("guards"):
            _guards_log.info("GUARDS:\n%s", entry.guards, extra={"guards": entry.guards})

    def entries(self) -> list[_cache.CacheEntry]:
        """The cached entries this wrapper can run (its backend's), most recent first."""
        return [entry for entry, _ in self.ordered]


def _on_stance_change(old: str, new: str) -> None:
    if "force_eager" in (old, new):
        for compiled in list(_live):
            compiled.regenerate()


_stance.on_stance_change(_on_stance_change)


def _compile_target(obj: Any, settings: _Settings) -> Any:
    if isinstance(obj, torch.nn.Module):
        return _compile_target(obj.forward, settings)
    if isinstance(obj, types.MethodType):
        wrapper = _compile_target(obj.__func__, settings)
        return types.MethodType(wrapper, obj.__self__)
    if not isinstance(obj, (types.FunctionType, type)) and callable(obj):
        call_method = inspect.getattr_static(type(obj), "__call__", None)
        if isinstance(call_method, types.FunctionType):  # an object whose class defines __call__ in Python
            return _compile_target(types.MethodType(call_method, obj), settings)
        # A builtin (torch.sin) or a partial: compile a Python function calling it.
        target, bound, keywords = obj, (), {}
        if isinstance(obj, functools.partial):  # its arguments are read as constants, not through the object
            target, bound, keywords = obj.func, obj.args, obj.keywords

        def call(*args: Any, **kwargs: Any) -> Any:
            return target(*bound, *args, **keywords, **kwargs)

        call.__name__ = call.__qualname__ = getattr(obj, "__name__", type(obj).__name__)
        call.__doc__ = getattr(obj, "__doc__", None)
        call.__wrapped__ = obj  # type: ignore[attr-defined]
        return _compile_target(call, settings)
    if not isinstance(obj, types.FunctionType):
        raise TypeError(
            f"optimize expects a function, method, nn.Module or other callable, got {type(obj).__name__} {obj!r}"
        )
    compiled = obj.__dict__.get("_dynajit_compiled")
    if compiled is not None:  # compiling a compiled function again: compile its original with the new settings
        obj = compiled.fn
    if _marks.is_disabled(obj):
        return obj
    compiled = CompiledFunction(obj, settings)
    _public.add(compiled)
    wrapper = compiled.wrapper
    for attribute in ("__module__", "__name__", "__qualname__", "__doc__", "__annotations__"):
        setattr(wrapper, attribute, getattr(obj, attribute))
    wrapper.__dict__.update(obj.__dict__)
    wrapper.__wrapped__ = obj  # type: ignore[attr-defined]
    wrapper._dynajit_compiled = compiled  # type: ignore[attr-defined]
    return wrapper


def _under_a_mode() -> bool:
    """Whether a torch dispatch mode, or a torch function mode other than a default device, is on.

    Such a mode (the caller's op counter or logger, a fake-tensor mode, a tracer's) must see the ops eager runs,
    no more and no fewer: a compiled graph runs kernels where eager runs aten ops, and compiling one runs torch's
    own (fake tensors, AOT autograd), so the function runs as it is. A default device
    (``torch.set_default_device``, ``with torch.device(...)``) only sets where factory functions put their
    tensors, which tracing follows: functions compile under it.
    """
    if torch._C._len_torch_dispatch_stack():
        return True
    modes = (torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack()))
    return any(not isinstance(mode, DeviceContext) for mode in modes)


def optimize(
    backend: Callable[..., Any], *, fullgraph: bool = False, dynamic: bool | None = None
) -> Callable[[Any], Any]:
    """Return a decorator that compiles functions and methods with ``backend``.

    The compiled wrapper keeps the function's signature. Each call tries the
    cached entries (guards, most recent first) and runs the hit; a miss
    converts the frame: tensor operations are captured into FX graphs handed
    to ``backend(gm, example_inputs)``, and the rest runs as rewritten Python.

    Args:
        backend: a callable ``(gm: torch.fx.GraphModule, example_inputs) -> callable``.
        fullgraph: when True, a graph break is an error naming its reason and line.
        dynamic: None compiles static shapes and turns dimensions seen to change dynamic;
            True starts dynamic; False never does.

    Returns:
        A decorator. Applied to a function it returns the compiled function; to a
        bound method, the compiled method bound to the same object; to an
        ``nn.Module``, its compiled ``forward`` bound to the module (module hooks
        are not run; ``dynajit.compiler.compile`` wraps modules properly).
        A function marked with ``disable`` is returned unchanged.

    Raises:
        TypeError: ``backend`` is not callable, or the decorated object is not a
            Python function, method or module.
    """
    if not callable(backend):
        raise TypeError(f"optimize expects a backend callable (gm, example_inputs) -> callable, got {backend!r}")
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic takes None, True or False, got {dynamic!r}")
    settings = _settings(backend, bool(fullgraph), dynamic)

    def decorate(fn: Any) -> Any:
        return _compile_target(fn, settings)

    return decorate


def optimize_assert(backend: Callable[..., Any], *, dynamic: bool | None = None) -> Callable[[Any], Any]:
    """``optimize(backend, fullgraph=True)``: every graph break is an error."""
    return optimize(backend, fullgraph=True, dynamic=dynamic)


def reset() -> None:
    """Forget every compiled entry: the next call of each compiled function compiles again.

    Also clears the interception caches and recompile warnings; marks
    (``disable``, ``allow_in_graph``, ...) and the stance are kept.
    """
    with _lock:
        for cache in _cache.all_caches():
            cache.clear()
        for settings in list(_settings_table.values()):
            settings.intercepted.clear()
        _type_kinds.clear()
        _settings_table.clear()
        for compiled in list(_live):
            compiled.instances.clear()
            compiled.rejected.clear()
            compiled.regenerate()
