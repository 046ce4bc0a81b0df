"""``export``: capture a function as one whole graph, with the guards that keep it valid.

Export converts the frame with fullgraph semantics and ``ctx.export`` set,
through a backend that only records the graph (no backend compiler runs), so
it works with dynajit-capture and its lower layers alone. The graph module it
returns answers only for inputs like the example's: called on others (another
size, dtype, rank), it raises :class:`ExportInputError` naming the guard.
"""

from __future__ import annotations

import time
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from dynajit.capture import _dispatch, _marks, _observe
from dynajit.capture._runtime import original_of

__all__ = ["ExportError", "ExportInputError", "ExportResult", "export"]


class ExportError(RuntimeError):
    """The function cannot be exported as one graph; the message gives the reason and the user's line."""


class ExportInputError(RuntimeError):
    """An exported graph module was called on inputs its guards refuse (another size, dtype or rank)."""


@dataclass
class ExportResult:
    """What ``export`` captured.

    Attributes:
        graph_module: the whole function as one ``torch.fx.GraphModule``,
            callable with the same inputs as the function and giving equal results.
        guards: the ``GuardSet`` under which the graph is valid (input
            dtypes, shapes, globals the trace relied on).
    """

    graph_module: torch.fx.GraphModule
    guards: Any


def _function_and_bound_self(fn: Any) -> tuple[types.FunctionType, tuple[Any, ...]]:
    if isinstance(fn, torch.nn.Module):
        fn = fn.forward
    fn = original_of(fn) or fn  # exporting a compiled function exports its original
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        return fn.__func__, (fn.__self__,)
    if isinstance(fn, types.FunctionType):
        return fn, ()
    raise TypeError(
        f"export expects a Python function, method or nn.Module, got {type(fn).__name__} {fn!r}; "
        "wrap other callables in a Python function"
    )


class _UserSignature(torch.fx.graph.CodeGen):
    """Generates ``forward`` with the exported function's own parameters: defaults, ``*args``, keyword-only, ``**kw``.

    The graph's placeholders stay as the converter made them (one per argument);
    the generated ``forward`` binds them from the user's parameters, so
    ``gm(x, y)`` works when ``f(x, y, scale=2.0)`` was exported from ``f(x, y)``.
    """

    # The one global the signature's default expressions read (a tuple, so torch.fx registers it under this name).
    DEFAULTS = "_dynajit_export_defaults"

    def __init__(self, params: str, targets: tuple[str, ...], sources: tuple[str, ...], defaults: tuple[Any, ...]):
        super().__init__()
        self.params, self.targets, self.sources, self.defaults = params, targets, sources, defaults

    def gen_fn_def(self, free_vars: list[str], maybe_return_annotation: str, *, expanded_def: bool = False) -> str:
        header = f"def {self._func_name}(self, {self.params}){maybe_return_annotation}:"
        renamed = [(target, source) for target, source in zip(self.targets, self.sources) if target != source]
        if not renamed:
            return header
        # one simultaneous assignment, so a placeholder named like another parameter cannot clobber it
        targets = ", ".join(target for target, _ in renamed)
        sources = ", ".join(source for _, source in renamed)
        return f"{header}\n    {targets}, = {sources},"

    def additional_globals(self) -> list[tuple[str, Any]]:
        return [(self.DEFAULTS, self.defaults)]


def _take_user_signature(gm: torch.fx.GraphModule, fn: types.FunctionType, n_bound: int, where: str) -> None:
    """Give ``gm.forward`` the parameters of ``fn`` (after ``n_bound`` bound ones such as a module's ``self``)."""
    code = fn.__code__
    layout = _dispatch.layout_of(code)
    names = layout.names[n_bound:]
    targets = tuple(node.target for node in gm.graph.nodes if node.op == "placeholder")
    if len(targets) != len(names):
        raise ExportError(
            f"exporting {where}: the graph takes {len(targets)} inputs for {len(names)} parameters {names}; "
            "the converter's export graph must have one placeholder per parameter"
        )
    # placeholders named after the parameters are matched by name, otherwise by position (co_varnames order)
    sources = tuple(t.lstrip("*") for t in targets) if set(t.lstrip("*") for t in targets) == set(names) else names
    if "self" in names:
        raise ExportError(f"exporting {where}: a parameter named 'self' clashes with the graph module's own 'self'")
    positional = layout.names[: layout.n_positional]
    defaults: dict[str, Any] = dict(
        zip(positional[len(positional) - len(fn.__defaults__ or ()) :], fn.__defaults__ or ())
    )
    defaults.update(fn.__kwdefaults__ or {})
    values = tuple(defaults.values())
    slots = {name: f"{_UserSignature.DEFAULTS}[{index}]" for index, name in enumerate(defaults)}
    fixed = ", ".join(f"{name}={slots[name]}" if name in slots else name for name in _parameters(layout, n_bound))
    gm.graph.set_codegen(_UserSignature(fixed, targets, sources, values))
    gm.recompile()


def _parameters(layout: _dispatch.ArgumentLayout, n_bound: int) -> list[str]:
    """The parameter list of ``layout`` without its first ``n_bound`` positional parameters, as source pieces."""
    params = [piece.strip() for piece in layout.params.split(",")] if layout.params else []
    dropped = 0
    while dropped < n_bound:
        if params[0] != "/":
            dropped += 1
        params.pop(0)
    if params and params[0] == "/":
        params.pop(0)
    return params


def _record(function: types.FunctionType, kind: str, **details: Any) -> _observe.FrameRecord:
    return _observe.FrameRecord(code=function.__code__, name=function.__qualname__, kind=kind, **details)


def export(fn: Callable[..., Any]) -> Callable[..., ExportResult]:
    """Return a function that captures ``fn`` on the given arguments as one graph.

    ``export(fn)(*args, **kwargs)`` traces ``fn`` on those arguments with
    every graph break turned into an error, and returns an
    :class:`ExportResult` holding the graph module and its guards.

    Args:
        fn: a Python function, a bound method or an ``nn.Module`` (its ``forward``).

    Returns:
        A function taking ``fn``'s arguments and returning an ``ExportResult``.

    Raises:
        ExportError: (when called) the function graph-breaks, has nothing to
            capture, or does not become exactly one graph; the message names
            the reason and the user's file and line.
        TypeError: ``fn`` is not a Python function, method or module.
    """
    function, bound = _function_and_bound_self(fn)
    bind = _dispatch.binder(function)

    def run_export(*args: Any, **kwargs: Any) -> ExportResult:
        from dynajit.capture import _convert
        from dynajit.capture._frame import FrameContext, GraphBreak, SkipFrame, Unsupported

        values = bind(*bound, *args, **kwargs)
        recorded: list[torch.fx.GraphModule] = []

        def record(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
            recorded.append(gm)
            return gm.forward

        ctx = FrameContext(backend=record, fullgraph=True, export=True, export_bound=len(bound))
        where = f"{function.__qualname__!r} ({function.__code__.co_filename}:{function.__code__.co_firstlineno})"
        observed = _observe.active()
        start = time.perf_counter()
        try:
            with _marks.compiling(exporting=True):
                converted = _convert.convert_frame(function, values, ctx)
        except Unsupported as unsupported:
            error = ExportError(f"cannot export {where} as one graph: {unsupported}")
            error.reason = unsupported.reason  # type: ignore[attr-defined]
            error.user_stack = unsupported.user_stack  # type: ignore[attr-defined]
            if observed:
                brk = GraphBreak(unsupported.reason, tuple(unsupported.user_stack))
                _observe.notify(_record(function, "error", graph_breaks=(brk,), reason=str(error)))
            raise error from unsupported
        except SkipFrame as skip:
            error = ExportError(f"nothing to export in {where}: {skip.reason}")
            if observed:
                _observe.notify(_record(function, "error", reason=str(error)))
            raise error from skip
        if observed:
            _observe.notify(
                _record(
                    function,
                    "export",
                    graphs=tuple(converted.graphs),
                    guards=converted.guards,
                    seconds=time.perf_counter() - start,
                )
            )
        graph_module = getattr(converted, "export_graph_module", None)
        if graph_module is None:
            if len(converted.graphs) != 1:
                raise ExportError(f"exporting {where} produced {len(converted.graphs)} graphs; expected exactly one")
            graph_module = converted.graphs[0].graph_module
        else:
            _take_user_signature(graph_module, function, len(bound), where)
            _check_inputs_on_call(graph_module, function, len(bound), converted.guards, where)
        return ExportResult(graph_module=graph_module, guards=converted.guards)

    return run_export


def _check_inputs_on_call(
    gm: torch.fx.GraphModule, fn: types.FunctionType, n_bound: int, guards: Any, where: str
) -> None:
    """Make ``gm`` refuse, with :class:`ExportInputError`, the arguments the guards on ``fn``'s own parameters refuse.

    The graph holds what the trace read from its example inputs (sizes as constants, a branch on a dtype), so
    another input would get a silently wrong answer. Guards on globals and a bound ``self`` are not checked: the
    exported program is a snapshot of those. Fake and traced tensors pass unchecked, so the graph module can
    itself be traced.
    """
    from dynajit.guards import GuardSet

    layout = _dispatch.layout_of(fn.__code__)
    own = set(layout.names[n_bound:])

    def on_parameters(guard: Any) -> bool:
        roots = [source.root() for source in guard.sources]
        return bool(roots) and all(getattr(root, "local_name", None) in own for root in roots)

    kept = GuardSet(guard for guard in guards if on_parameters(guard))
    if not kept:
        return
    closure = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    compiled = kept.compile(arg_names=layout.names, f_globals=fn.__globals__, closure=closure)
    bind = _dispatch.binder(fn)
    unbound = (None,) * n_bound  # no kept guard reads a bound argument

    def check(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if any(_traced(value) for value in (*args, *kwargs.values())):
            return
        values = bind(*unbound, *args, **kwargs)
        if not compiled.check(*values):
            raise ExportInputError(
                f"the graph exported from {where} was called on inputs its guards refuse: "
                f"{compiled.failure_reason(*values)}; export it again on inputs like these"
            )

    gm.register_forward_pre_hook(check, with_kwargs=True)


def _traced(value: Any) -> bool:
    """A value a tracer or a fake mode made (its metadata may be symbolic or a proxy's)."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(value, (torch.fx.Proxy, FakeTensor)) or (
        isinstance(value, torch.Tensor) and type(value) not in (torch.Tensor, torch.nn.Parameter)
    )
