"""``compile_fx``: the backend entry point.

Every graph goes through AOT autograd (``functorch.compile.aot_module_simplified``) with a
decomposition table, so parameters are lifted to inputs and inference and training graphs take
one road. A training graph is split by the min-cut partitioner (the backward recomputes cheap pointwise
values rather than saving them). Each forward / backward aten graph is lowered, scheduled, code-generated (C++ for CPU,
Triton for CUDA or when ``cpu_backend="triton"``), built, and wrapped.

A static graph is specialised to the example inputs' shapes, strides and dtypes; a call with others
compiles again. A dynamic graph (placeholder ``example_value``s with symbolic sizes, see
``dynajit.fxgraph.symbolic_fake``) is traced by AOT autograd with those fake values, so its aten
graphs and kernels are symbolic: it is compiled once and runs at every size its symbols allow.
"""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import functools
import logging
import operator
import os
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode

from dynajit.fxgraph import (
    artifact_enabled,
    artifact_logger,
    checking_saved_versions,
    compiling_outside_inference_mode,
    dtype_views_from_sources,
    full_collections_deferred,
    is_symbolic,
    keep_written_strides,
    matching_eager_backward_formulas,
    reads_data,
    recording_saved_versions,
    reporting_reached_outputs,
    restoring_view_bits,
    returning_no_views,
    running_below_autograd,
    skipping_zero_tangents,
    spelled_as_calls,
    stashing_conditional_saves,
)
from dynajit.inductor_lite import _autotune, _sym
from dynajit.inductor_lite._attention import fuse_attention
from dynajit.inductor_lite._batch_norm import batch_norms_as_one_op
from dynajit.inductor_lite._build import BuildError, failed_build, python_function, start_library, stats
from dynajit.inductor_lite._codegen_cpp import PRELUDE, CppOptions, kernel_source, math_declarations
from dynajit.inductor_lite._config import config, resolve_settings
from dynajit.inductor_lite._decompositions import decomposition_table, our_autograd_kernels
from dynajit.inductor_lite._direct import direct_inference
from dynajit.inductor_lite._eager_checks import EagerError, run_on_ones
from dynajit.inductor_lite._freezing import fold_conv_batch_norm
from dynajit.inductor_lite._graph import example_device, lower_graph
from dynajit.inductor_lite._ir import Buffer
from dynajit.inductor_lite._layout import channels_last
from dynajit.inductor_lite._lower_indirect import INDIRECT
from dynajit.inductor_lite._one_trace import trace_inference_once
from dynajit.inductor_lite._scheduler import Kernel, schedule
from dynajit.inductor_lite._uniform_math import load_uniform_math
from dynajit.inductor_lite._wrapper import WrapperBuilder
from dynajit.inductor_lite.codegen_triton import LIBDEVICE_ONLY

__all__ = ["CompiledGraph", "compile_fx", "compiled_graphs", "decomposition_table"]

aten = torch.ops.aten
output_code_log = artifact_logger("output_code")
log = logging.getLogger("dynajit.inductor_lite")


class CompiledGraph:
    """One compiled aten graph: the generated wrapper plus its sources (for logs and tests).

    ``ready``, when given, waits for kernels still being built and binds them into the wrapper; the
    first call runs it, later calls go straight to the wrapper. Should the build fail, the graph runs
    ``fallback`` (its aten ops, eagerly) from then on, with a warning naming the error, just as a
    failed compile would have left the caller running eagerly; under ``strict`` the build error is
    raised instead, at every call.
    """

    _boxed_call = True

    def __init__(
        self,
        call: Callable[[list[Any]], Any],
        wrapper_source: str,
        kernel_source: str,
        info: dict,
        ready: Callable[[], None] | None = None,
        fallback: Callable[[list[Any]], Any] | None = None,
        strict: bool = False,
    ) -> None:
        self.call = call
        self.wrapper_source = wrapper_source
        self.kernel_source = kernel_source
        self.info = info
        if ready is not None:
            self._ready, self._run, self._fallback, self._strict = ready, call, fallback, strict
            self.call = self._first_call

    def _first_call(self, args: list[Any]) -> Any:
        try:
            self._ready()
        except BuildError as err:
            if self._fallback is None:
                raise
            if self._strict:
                raise BuildError(
                    f"{err}\ninductor-lite: strict mode (config.strict, DYNAJIT_STRICT=1) does not run this "
                    "graph's aten ops in place of its kernels"
                ) from err
            warnings.warn(f"{err}\ninductor-lite: this graph runs its aten ops eagerly instead", RuntimeWarning, 2)
            self.info.setdefault("fallbacks", []).append(f"graph: {err}")
            self._run = self._fallback
        self.call = self._run
        return self._run(args)

    def __call__(self, args: list[Any]) -> Any:
        return self.call(args)


def _use_triton(device: torch.device, settings: dict[str, Any]) -> bool:
    return device.type == "cuda" or settings["cpu_backend"] == "triton"


def _shape_env(example_inputs: Sequence[Any]) -> Any:
    """The ShapeEnv of a dynamic graph's symbolic inputs, or None for a static graph."""
    for x in example_inputs:
        if isinstance(x, torch.SymInt) and is_symbolic(x):
            return x.node.shape_env
        if isinstance(x, torch.Tensor) and is_symbolic(x):
            return x.fake_mode.shape_env  # type: ignore[attr-defined]
    return None


def compile_graph(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], settings: dict[str, Any], *, check_inputs: bool = False
) -> CompiledGraph:
    """Lower, schedule, generate code for and build one aten-level graph (static or symbolic sizes).

    ``check_inputs``: a dynamic graph's wrapper checks that the inputs' sizes agree with its shape symbols.
    """
    stats.graphs_compiled += 1
    unreadable = _unreadable_by_kernels(gm, example_inputs)
    if unreadable is not None:
        log.info("inductor-lite: this graph has %s; its aten graph runs as it is", unreadable)
        return _aten_graph(gm, RuntimeError(unreadable))
    shape_env = _shape_env(example_inputs)
    with _sym.use_shapes(shape_env):
        try:
            return _compile_graph(gm, example_inputs, settings, check_inputs)
        except EagerError as err:
            return _raising_graph(err.error)
        except _sym.Unsupported as err:
            if shape_env is None:
                raise
            # Something of this graph can only be generated for fixed sizes: run its aten graph as it is.
            log.warning("inductor-lite: %s; running this dynamic graph through aten", err)
            return _aten_graph(gm, err)


_KERNEL_DEVICES = ("cpu", "cuda")


def _unreadable_by_kernels(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> str | None:
    """What of the graph's tensors no generated kernel can read, if any, said as "tensors on meta", "a tensor with
    the negative bit".

    A kernel reads and writes memory as it is stored: a meta tensor has none (the kernel crashed the process),
    and a tensor with the negative or conjugate bit (``z.conj().imag``, ``_neg_view``) holds elements aten reads
    negated or conjugated (the kernel read them with the wrong sign).
    """
    values = [*example_inputs, *(node.meta.get("val") for node in gm.graph.nodes)]
    for value in pytree.tree_leaves(values):
        if not isinstance(value, torch.Tensor):
            continue
        if value.device.type not in _KERNEL_DEVICES:
            return f"tensors on {value.device.type}"
        if value.is_neg() or value.is_conj():
            return f"a tensor with the {'negative' if value.is_neg() else 'conjugate'} bit"
    return None


def _raiser(error: Exception) -> Callable[..., Any]:
    """A function raising ``error`` at every call, as eager does for the inputs it was compiled for."""

    def raising(*args: Any) -> Any:
        raise error.with_traceback(None)

    return raising


def _raising_graph(error: Exception) -> CompiledGraph:
    """A graph eager would raise ``error`` for (an op's dtype check): each call raises it, as eager does."""

    def call(args: list[Any]) -> Any:
        args.clear()
        raise error.with_traceback(None)

    info = {"kernels": 0, "externs": 0, "fallbacks": [], "raises": repr(error), "dynamic": False, "symbols": []}
    return CompiledGraph(call, "", "", info)


def _aten_call(gm: torch.fx.GraphModule) -> Callable[[list[Any]], Any]:
    """The boxed call running ``gm``'s aten ops eagerly."""

    spelled_as_calls(gm)

    def call(args: list[Any]) -> Any:
        values = list(args)
        args.clear()
        return gm(*values)

    return call


def _aten_graph(gm: torch.fx.GraphModule, reason: Exception) -> CompiledGraph:
    info = {"kernels": 0, "externs": 0, "fallbacks": [f"graph: {reason}"], "dynamic": True, "symbols": []}
    return CompiledGraph(_aten_call(gm), "", "", info)


def _compile_graph(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any], settings: dict[str, Any], check_inputs: bool
) -> CompiledGraph:
    start = time.perf_counter()
    device = example_device(example_inputs)
    triton = _use_triton(device, settings)
    if triton and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(
            "inductor-lite: cpu_backend='triton' runs Triton kernels on CPU tensors through Triton's interpreter; "
            "set TRITON_INTERPRET=1 in the environment before triton is imported"
        )
    # Triton's interpreter has no libdevice: those ops run through aten between the kernels.
    # (indirect loads are the C++ generator's alone: on Triton an embedding or a gather stays an aten call)
    unrenderable = ((LIBDEVICE_ONLY if device.type != "cuda" else frozenset()) | INDIRECT) if triton else frozenset()
    lowered, fallbacks = lower_graph(gm, example_inputs, unrenderable)
    items = schedule(lowered)
    kernels = [i for i in items if isinstance(i, Kernel)]
    dtypes = {name: buf.dtype for name, buf in lowered.all_buffers.items() if isinstance(buf, Buffer)}

    def build(variant: Any) -> CompiledGraph:
        ready = None
        if triton:
            from dynajit.inductor_lite import codegen_triton

            calls, source = codegen_triton.build_kernels(kernels, dtypes, {**settings, "triton_block": variant})
        else:
            calls, source, ready = _build_cpp(kernels, dtypes, settings, variant)
        builder = WrapperBuilder(lowered, items, check_inputs, _aten_call(gm))
        call, wrapper_source = builder.build(calls)
        info = {"externs_in_place": builder.in_place}
        if ready is None:
            return CompiledGraph(call, wrapper_source, source, info)
        return CompiledGraph(
            call, wrapper_source, source, info, _binder(call, ready), _aten_call(gm), settings["strict"]
        )

    if triton:
        base: Any = settings["triton_block"]
        candidates = [base] + [b for b in (128, 512, 2048) if b != base]
    else:
        base = CppOptions(settings["parallel_threshold"], settings["num_threads"], settings["vector_lanes"])
        candidates = [
            base,
            replace(base, num_threads=1),
            replace(base, vector_lanes=16),
            replace(base, parallel_threshold=4096),
        ]
    chosen = base
    if settings["max_autotune"] and kernels:
        chosen = _autotune.tune(build, candidates, example_inputs)
    compiled = build(chosen)
    compiled.info.update(
        kernels=len(kernels),
        externs=len(items) - len(kernels),
        fallbacks=fallbacks,
        tuned=chosen,
        compile_seconds=time.perf_counter() - start,
        dynamic=_sym.is_dynamic_graph(),
        symbols=sorted(_sym.current_symbols()),
    )
    if artifact_enabled("output_code"):
        output_code_log.info(
            "inductor-lite kernels:\n%s\n\ninductor-lite wrapper:\n%s", compiled.kernel_source, compiled.wrapper_source
        )
    if settings["cudagraphs"] and lowered.device.type == "cuda" and compiled.info["dynamic"]:
        log.info("inductor-lite: CUDA graphs need fixed sizes; not recording one for a dynamic graph")
    elif settings["cudagraphs"] and lowered.device.type == "cuda":
        wrapped = _autotune.wrap_cudagraphs(compiled, example_inputs)
        compiled = CompiledGraph(wrapped, compiled.wrapper_source, compiled.kernel_source, compiled.info)
    return compiled


class _Unbuilt:
    """Stands for a kernel in the wrapper's namespace until its library is loaded."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any) -> None:
        raise RuntimeError(f"inductor-lite: kernel {self.name} called before its library was loaded")


def _build_cpp(
    kernels: list[Kernel], dtypes: dict[str, torch.dtype], settings: dict[str, Any], options: CppOptions
) -> tuple[dict[str, tuple[Callable[..., Any], list[str], bool, list[str]]], str, Callable[[], dict] | None]:
    """Kernel calls for the wrapper, the source, and (for a build left running) a function returning the kernels.

    With ``background_build`` the wrapper is written while g++ runs: its kernels are :class:`_Unbuilt`
    until the returned function has waited for the libraries and looked them up. A graph with many
    kernels is built as several libraries at once (see :func:`_split`); the source shown is one.
    """
    if not kernels:
        return {}, "", None
    vectorised, runtime_error = _has_libmvec(), None
    try:  # before any kernel library is loaded: they call its functions
        if vectorised:
            load_uniform_math(settings["cxx"], settings["cxx_flags"], settings["cache_dir"])
    except BuildError as err:  # the kernels' builds fail with it, where a failed build is reported
        runtime_error = err
    header = "\n\n".join([math_declarations(vectorised), PRELUDE])  # the prelude calls dj_m_erf
    params: dict[str, list[str]] = {}
    symbols: dict[str, list[str]] = {}
    texts: list[str] = []
    built: list[Kernel] = []  # the kernels whose functions are compiled: one per distinct body
    symbol_of: dict[str, str] = {}  # each kernel's function in the library (the first kernel of its body's)
    first_with: dict[str, str] = {}
    for kernel in kernels:
        text, params[kernel.name], symbols[kernel.name] = kernel_source(kernel, dtypes, options)
        # A model repeats blocks of one shape: their kernels differ in name only (distilbert's 10 kernels are 7
        # bodies, bart's 15 are 7), and g++ need not optimise a body twice.
        body = re.sub(rf"\b{kernel.name}\b", "", text)
        symbol_of[kernel.name] = first_with.setdefault(body, kernel.name)
        if symbol_of[kernel.name] == kernel.name:
            texts.append(text)
            built.append(kernel)
    source = "\n\n".join([header, *texts]) + "\n"
    groups = _split([len(t) for t in texts], settings["build_parts"])
    futures = [
        start_library(
            source if len(groups) == 1 else "\n\n".join([header, *(texts[i] for i in group)]) + "\n",
            settings["cxx"],
            settings["cxx_flags"],
            settings["cache_dir"],
        )[0]
        if runtime_error is None
        else failed_build(runtime_error)
        for group in groups
    ]
    part_of = {built[i].name: p for p, group in enumerate(groups) for i in group}

    def load() -> dict[str, Callable[..., Any]]:
        libs = [future.result() for future in futures]
        by_symbol = {symbol: python_function(libs[part_of[symbol]], symbol) for symbol in set(symbol_of.values())}
        return {kernel.name: by_symbol[symbol_of[kernel.name]] for kernel in kernels}

    if settings["background_build"] and not all(f.done() and f.exception() is None for f in futures):
        fns: dict[str, Callable[..., Any]] = {k.name: _Unbuilt(k.name) for k in kernels}
        ready: Callable[[], dict] | None = load
    else:
        fns, ready = load(), None
    calls = {k.name: (fns[k.name], params[k.name], True, symbols[k.name]) for k in kernels}
    return calls, source, ready


# Below this many kernels per library, a second compiler process costs more than it saves: each one
# parses the prelude and starts g++, as, ld (about 0.09 s), and a kernel takes about 0.025 s to optimise.
_KERNELS_PER_PART = 4


def _split(sizes: list[int], parts: int) -> list[list[int]]:
    """Kernel indices grouped into libraries built in parallel, in source order, balanced by source length.

    ``parts`` 0 means one per available CPU, while each gets at least ``_KERNELS_PER_PART`` kernels.
    """
    if parts <= 0:
        parts = min(_cpus(), len(sizes) // _KERNELS_PER_PART)
    parts = max(1, min(parts, len(sizes)))
    if parts == 1:
        return [list(range(len(sizes)))]
    groups: list[list[int]] = [[] for _ in range(parts)]
    loads = [0] * parts
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        lightest = loads.index(min(loads))
        groups[lightest].append(i)
        loads[lightest] += sizes[i]
    return [sorted(group) for group in groups]


def _binder(call: Callable[..., Any], load: Callable[[], dict[str, Callable[..., Any]]]) -> Callable[[], None]:
    """Waits for the kernels and puts each where the wrapper (``call``) looks up its :class:`_Unbuilt`."""

    def ready() -> None:
        fns = load()
        namespace = call.__globals__
        for name, value in list(namespace.items()):
            if isinstance(value, _Unbuilt):
                namespace[name] = fns[value.name]

    return ready


@functools.cache
def _cpus() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@functools.cache
def _has_libmvec() -> bool:
    return ctypes.util.find_library("mvec") is not None


def _signature(args: Sequence[Any]) -> tuple:
    return tuple(
        [
            (a.shape, a.stride(), a.dtype, a.device, a.requires_grad) if isinstance(a, torch.Tensor) else (type(a), a)
            for a in args
        ]
    )


def _example_output(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
    """The structure of ``gm``'s output: from node metadata, else by running it on fake tensors."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    leaves = [x for x in pytree.tree_leaves(output.args[0]) if isinstance(x, torch.fx.Node)]
    metas = [x.meta.get("val", x.meta.get("example_value")) for x in leaves]
    if all(isinstance(m, torch.Tensor) for m in metas):
        return None
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fakes = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in example_inputs]
        return gm(*fakes)


def _flat_outputs(
    gm: torch.fx.GraphModule, example_inputs: Sequence[Any]
) -> tuple[torch.fx.GraphModule, pytree.TreeSpec | None]:
    """``gm`` returning a flat tuple (what AOT autograd takes) and the spec to rebuild its real output."""
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    result = output.args[0]
    example = _example_output(gm, example_inputs)
    if type(result) is tuple and all(not isinstance(x, (list, tuple, dict)) for x in result):
        flat_example = example is None or (
            type(example) is tuple and all(not isinstance(x, (list, tuple, dict)) for x in example)
        )
        if flat_example:
            return gm, None
    graph = copy.deepcopy(gm.graph)
    new_output = next(n for n in reversed(graph.nodes) if n.op == "output")
    if example is None:
        leaves, spec = pytree.tree_flatten(new_output.args[0])
    else:
        leaves = []
        with graph.inserting_before(new_output):
            _expand(graph, new_output.args[0], example, leaves)
        spec = pytree.tree_flatten(example)[1]
    new_output.args = (tuple(leaves),)
    return torch.fx.GraphModule(gm, graph), spec


def _expand(graph: torch.fx.Graph, arg: Any, value: Any, leaves: list[Any]) -> None:
    """Append the leaves of ``value`` as graph values, indexing into nodes that produce containers."""
    if isinstance(value, (list, tuple)):
        for k, item in enumerate(value):
            sub = graph.call_function(operator.getitem, (arg, k)) if isinstance(arg, torch.fx.Node) else arg[k]
            _expand(graph, sub, item, leaves)
    elif isinstance(value, dict):
        for key, item in value.items():
            sub = graph.call_function(operator.getitem, (arg, key)) if isinstance(arg, torch.fx.Node) else arg[key]
            _expand(graph, sub, item, leaves)
    else:
        leaves.append(arg)


def _kind(args: Sequence[Any], symbolic: Sequence[Any]) -> tuple:
    """What a dynamic graph is compiled for besides sizes: dtypes, devices, ranks, requires_grad, static scalars."""
    return tuple(
        [
            (a.dtype, a.device, a.dim(), a.requires_grad)
            if isinstance(a, torch.Tensor)
            else (type(a), None if isinstance(s, torch.SymInt) else a)
            for a, s in zip(args, symbolic)
        ]
    )


def symbolic_inputs(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[Any] | None:
    """The placeholders' symbolic example values when ``gm`` is a dynamic graph, else None."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("example_value") for n in placeholders]
    if len(values) != len(example_inputs) or not any(is_symbolic(v) for v in values):
        return None
    out = []
    for v, x in zip(values, example_inputs):
        if v is None or (isinstance(v, torch.Tensor) != isinstance(x, torch.Tensor)):
            v = x  # no usable example value: AOT autograd fakes the real input, with static sizes
        elif isinstance(v, torch.Tensor) and v.requires_grad != x.requires_grad:
            # The real inputs say which need gradients (the example values may have been made from detached ones).
            v = v.detach().requires_grad_(x.requires_grad)
        out.append(v)
    return out


def _with_size_inputs(gm: torch.fx.GraphModule, symbolic: Sequence[Any]) -> tuple[torch.fx.GraphModule, list]:
    """``gm`` taking each shape symbol of its inputs as one more int input, and where each is read.

    AOT autograd turns a float computed from sizes (batch norm's ``n / (n - 1)``) into a tensor
    from the graph input that carries its symbols, so every symbol must be some input's value.
    """
    provided = {a.node.expr for a in symbolic if isinstance(a, torch.SymInt)}
    size_args: list[tuple[int, int]] = []
    for i, a in enumerate(symbolic):
        for d, n in enumerate(a.shape if isinstance(a, torch.Tensor) else ()):
            expr = n.node.expr if isinstance(n, torch.SymInt) else None
            if expr is not None and expr.is_Symbol and expr not in provided:
                provided.add(expr)
                size_args.append((i, d))
    if not size_args:
        return gm, []
    graph = copy.deepcopy(gm.graph)
    last = [n for n in graph.nodes if n.op == "placeholder"][-1]
    for k, (i, d) in enumerate(size_args):
        with graph.inserting_after(last):
            last = graph.placeholder(f"size_{i}_{d}_{k}")
        last.meta["example_value"] = last.meta["val"] = symbolic[i].size(d)
    return torch.fx.GraphModule(gm, graph), size_args


class _Specialized:
    """Calls the AOT-compiled function for the inputs' signature; a new signature compiles again.

    A dynamic graph is compiled once for its symbolic example values; calls of the same kind
    (dtypes, devices, ranks) at any size use it.
    """

    def __init__(self, gm: torch.fx.GraphModule, settings: dict[str, Any], example_inputs: Sequence[Any]) -> None:
        self.symbolic = symbolic_inputs(gm, example_inputs)
        self.gm, self.spec = _flat_outputs(gm, example_inputs)
        self.size_args: list[tuple[int, int]] = []
        self.dynamic_gm = self.gm
        if self.symbolic is not None:
            self.dynamic_gm, self.size_args = _with_size_inputs(self.gm, self.symbolic)
        self.settings = settings
        self.compiled: dict[tuple, Callable[..., Any]] = {}
        self.graphs: list[CompiledGraph] = []
        self.last_key: tuple | None = None
        self.last_fn: Any = None
        self.dynamic_kind: tuple | None = None
        self.dynamic_fn: Any = None

    def compile_for(self, example_inputs: Sequence[Any], symbolic: list[Any] | None = None) -> Callable[..., Any]:
        settings = self.settings
        compiled_forward = False
        inferences: list[tuple[torch.fx.GraphModule, CompiledGraph]] = []

        # (AOT autograd compiles a training graph's backward at its first backward call, outside the frame's
        # compile: without the deferral a collection of the whole heap fell inside it, a seventh of a ViT's step)
        @full_collections_deferred()
        def compiler(graph: torch.fx.GraphModule, inputs: Sequence[Any], inference: bool = False) -> CompiledGraph:
            nonlocal compiled_forward
            traced = graph
            if inference and settings["layout_optimization"]:
                graph = channels_last(graph, example_device(inputs)) or graph
            with config.patch(settings):
                # The forward graph's inputs come from the caller: its wrapper checks their shape relations.
                compiled = compile_graph(
                    graph, inputs, settings, check_inputs=symbolic is not None and not compiled_forward
                )
            compiled_forward = True
            self.graphs.append(compiled)
            if inference:
                inferences.append((traced, compiled))
            return compiled

        # Imported at the first compile: functorch.compile costs about a second to import.
        from functorch.compile import aot_module_simplified

        from dynajit.inductor_lite._partition import partition, written_primals

        if symbolic is not None:
            symbolic = [*symbolic, *(symbolic[i].size(d) for i, d in self.size_args)]
        graph_module = self.gm if symbolic is None else self.dynamic_gm
        aot_graph, viewing_as_dtypes = dtype_views_from_sources(graph_module)
        try:
            # (a call-time compile runs in the caller's mode: under inference mode, compiled as under no_grad)
            with compiling_outside_inference_mode(), our_autograd_kernels():
                once = (
                    None
                    if symbolic is not None
                    else trace_inference_once(graph_module, example_inputs, decomposition_table())
                )
                if once is not None:
                    compiled = compiler(once.graph, once.fake_inputs, inference=True)
                    compiled.info["called_directly"] = compiled.info["traced_once"] = True
                    fn = once.caller(compiled)
                    self._keep(example_inputs, fn)
                    return fn
                aot_inputs = list(example_inputs if symbolic is None else symbolic)
                fn = reporting_reached_outputs(restoring_view_bits(viewing_as_dtypes(aot_module_simplified(
                    aot_graph, aot_inputs,
                    fw_compiler=recording_saved_versions(returning_no_views(compiler)),
                    bw_compiler=matching_eager_backward_formulas(skipping_zero_tangents(checking_saved_versions(
                        running_below_autograd(compiler)
                    ))),
                    decompositions=decomposition_table(),
                    inference_compiler=functools.partial(compiler, inference=True),
                    # A training graph saves fewer activations: the backward recomputes the pointwise ones it needs
                    # inside its own fused kernels, which costs less than writing them out and reading them back.
                    partition_fn=stashing_conditional_saves(functools.partial(
                        partition, written=functools.partial(written_primals, graph_module, aot_inputs),
                        layout=settings["layout_optimization"],
                    )),
                    keep_inference_input_mutations=False,
                )), graph_module))  # fmt: skip
        except EagerError as err:  # a decomposed op eager refuses for these dtypes
            fn = _raiser(err.error)
        if symbolic is not None:
            self.dynamic_kind, self.dynamic_fn = _kind(example_inputs, symbolic), fn
            return fn
        if inferences and (direct := direct_inference(*inferences[-1], example_inputs, graph_module)) is not None:
            fn = viewing_as_dtypes(direct)
            inferences[-1][1].info["called_directly"] = True
        self._keep(example_inputs, fn)
        return fn

    def _keep(self, example_inputs: Sequence[Any], fn: Callable[..., Any]) -> None:
        key = _signature(example_inputs)
        self.compiled[key] = fn
        self.last_key, self.last_fn = key, fn

    def __call__(self, *args: Any) -> Any:
        if self.dynamic_fn is not None and _kind(args, self.symbolic or ()) == self.dynamic_kind:
            out = self.dynamic_fn(*args, *(args[i].size(d) for i, d in self.size_args))
        else:
            key = _signature(args)
            if key == self.last_key:
                fn = self.last_fn
            else:
                fn = self.compiled.get(key) or self.compile_for(args)
                self.last_key, self.last_fn = key, fn
            out = fn(*args)
        return tuple(out) if self.spec is None else pytree.tree_unflatten(list(out), self.spec)


def compiled_graphs(fn: Callable[..., Any]) -> list[CompiledGraph]:
    """The aten graphs (forward, backward) compiled so far for a function returned by :func:`compile_fx`."""
    return list(getattr(fn, "graphs", []))


def compile_fx(
    gm: torch.fx.GraphModule,
    example_inputs: Sequence[Any],
    *,
    mode: str | None = None,
    options: dict[str, Any] | None = None,
) -> Callable[..., Any]:
    """Compile ``gm`` into fused kernels; returns a callable taking the graph's inputs positionally.

    ``mode`` is one of :func:`list_mode_options`; ``options`` patches :data:`config` for this compile
    only (unknown names raise :class:`~dynajit.fxgraph.ConfigError` listing close matches).

    When the placeholders' ``example_value``s have symbolic sizes (``dynajit.fxgraph.symbolic_fake`` /
    ``symbolic_int``, one FakeTensorMode and ShapeEnv), the graph is compiled once with symbolic
    sizes and serves every size the symbols allow; ``cache_stats()`` does not change on such calls.
    Guards AOT autograd's tracing needs are added to that ShapeEnv; code generation adds none.
    """
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError(f"compile_fx expects a torch.fx.GraphModule, got {type(gm).__name__}")
    settings = resolve_settings(mode, options)
    if settings["fuse_attention"]:
        gm = fuse_attention(gm)
    if settings["freezing"]:
        gm = fold_conv_batch_norm(gm)
    gm = batch_norms_as_one_op(gm)
    try:
        _check_inplace(gm)
    except EagerError as err:
        return _raiser(err.error)
    gm = keep_written_strides(gm)
    if reads_data(gm):
        return _aten_reading_data(gm, example_inputs)
    specialized = _Specialized(gm, settings, example_inputs)
    specialized.compile_for(example_inputs, specialized.symbolic)
    return specialized


def _aten_reading_data(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable[..., Any]:
    """A graph reading values from tensor data (``item()``, ``nonzero``): AOT autograd's aten graphs run as they are.

    Nothing here lowers sizes or scalars that exist only at run time; AOT autograd traces with the
    placeholders' example values, whose ShapeEnv knows those values' symbols.
    """
    from functorch.compile import aot_module_simplified, make_boxed_func

    log.warning("inductor-lite: this graph reads values from tensor data; its aten graphs run without kernels")
    placeholders = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    inputs = [
        value if isinstance(value, torch.Tensor) and isinstance(real, torch.Tensor) else real
        for value, real in zip(placeholders, example_inputs)
    ]
    inputs = [
        v.detach().requires_grad_(r.requires_grad) if isinstance(v, torch.Tensor) and v.requires_grad != r.requires_grad else v
        for v, r in zip(inputs, example_inputs)
    ]  # fmt: skip

    def run_as_is(graph: torch.fx.GraphModule, _inputs: Any) -> Callable[..., Any]:
        return make_boxed_func(spelled_as_calls(graph).forward)

    with our_autograd_kernels():
        return aot_module_simplified(gm, inputs, fw_compiler=run_as_is, bw_compiler=run_as_is)


_INPLACE_OPERATORS = {
    operator.iadd: "add_", operator.isub: "sub_", operator.imul: "mul_", operator.itruediv: "div_",
    operator.ifloordiv: "floor_divide_", operator.imod: "remainder_", operator.ipow: "pow_",
    operator.iand: "bitwise_and_", operator.ior: "bitwise_or_", operator.ixor: "bitwise_xor_",
}  # fmt: skip


def _check_inplace(gm: torch.fx.GraphModule) -> None:
    """Raise :class:`EagerError` for an in-place pointwise op eager refuses (``bool_tensor.mul_(2)``).

    Functionalization turns ``x.mul_(2)`` into ``mul`` and a copy back into ``x``, which casts: the
    check that the result's dtype can be written into ``x`` is lost with the in-place op, so it runs
    here, on the caller's graph, with one-element tensors of no dim. Whether a dtype can be written
    into another depends only on their kinds (bool, integer, float, complex), which a tensor's rank does
    not change; and a node's recorded value keeps the rank it had before an in-place change of its
    metadata (``x.squeeze_()``), so the ranks are left out rather than trusted.
    """
    for node in gm.graph.nodes:
        name: str
        if node.op == "call_method":
            name = str(node.target)
        elif node.op == "call_function":
            name = _INPLACE_OPERATORS.get(node.target) or str(getattr(node.target, "__name__", ""))
            if name not in _INPLACE_OPERATORS.values() and getattr(torch.Tensor, name, None) is not node.target:
                continue
        else:
            continue
        packet = getattr(aten, name, None) if name.endswith("_") and not name.startswith("_") else None
        if packet is None or not any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads()):
            continue
        run_on_ones(getattr(torch.Tensor, name), node.args, node.kwargs, "example_value", rank=False)
