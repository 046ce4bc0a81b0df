"""The graph being built for one converted frame: inputs, nodes, guards, side effects, and its compilation."""

from __future__ import annotations

import contextlib
import itertools
import keyword
import operator
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import sympy
import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedFakeTensorException,
    UnsupportedOperatorException,
)
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from dynajit.capture._frame import CompiledGraph, FrameContext, SkipFrame, Unsupported
from dynajit.capture._symbolic import eager_checks, shapes
from dynajit.capture._symbolic.autograd_replay import (
    check_input_effects,
    check_kept_layout,
    check_new_leaf,
    check_no_grad_view,
    check_returned_views,
    history,
    history_refused,
    keeping_view_kinds,
    layout_of,
    noting_saved_tensors,
    overlapping_view_bases,
)
from dynajit.capture._symbolic.data_dependent import DataScalarVar, bind_unbacked, is_data_dependent
from dynajit.capture._symbolic.data_errors import check_data_error_handled
from dynajit.capture._symbolic.dead_checks import first_outputs, unused_value_checks
from dynajit.capture._symbolic.preserved_state import preserved_process_state
from dynajit.capture._symbolic.saved_outputs import checking_saved_outputs, saved_output_checks
from dynajit.capture._symbolic.side_effects import SideEffects
from dynajit.capture._symbolic.subgraphs import Subgraph, lifted_proxy
from dynajit.capture._symbolic.variables import (
    VT,
    ConstVar,
    DictVar,
    ListVar,
    RaisesInPython,
    SliceVar,
    TensorVar,
    TupleVar,
    unsupported,
)
from dynajit.capture._symbolic.variables.containers import StructSeqVar
from dynajit.capture._symbolic.variables.symbolic import SymIntVar
from dynajit.fxgraph import (
    GraphBuilder,
    artifact_enabled,
    artifact_logger,
    compiling_outside_inference_mode,
    detaching_outputs,
    format_stack_trace,
)

if TYPE_CHECKING:
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["OUT_OF_PLACE", "OutputGraph", "sets_grad_mode"]

_graph_ids = itertools.count()

#: Each in-place operator and the binary operator Python falls back to when the left operand has no in-place method.
OUT_OF_PLACE: dict[Any, Any] = {
    operator.iadd: operator.add,
    operator.iand: operator.and_,
    operator.ifloordiv: operator.floordiv,
    operator.ilshift: operator.lshift,
    operator.imatmul: operator.matmul,
    operator.imod: operator.mod,
    operator.imul: operator.mul,
    operator.ior: operator.or_,
    operator.ipow: operator.pow,
    operator.irshift: operator.rshift,
    operator.isub: operator.sub,
    operator.itruediv: operator.truediv,
    operator.ixor: operator.xor,
}


class OutputGraph:
    """Everything one trace of a frame produces besides the bytecode."""

    def __init__(self, ctx: FrameContext) -> None:
        self.ctx = ctx
        # An op whose output shape depends on tensor data (nonzero, a boolean mask) is a graph break unless
        # configured (as in torch.compile's default): backends then compile graphs whose sizes come from inputs.
        from dynajit.capture.config import config

        # Likewise a value read from tensor data where a number is expected (a 0-d tensor as a size).
        shape_env = ShapeEnv(
            allow_dynamic_output_shape_ops=config.capture_dynamic_output_shape_ops,
            allow_scalar_outputs=config.capture_scalar_outputs,
        )
        self.fake_mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=False)
        self.builder = GraphBuilder(self.fake_mode)
        # The frame's own graph: inputs and module tensors are read into it even while a branch of a
        # higher-order op records into a subgraph of its own (``subgraph``), which lifts them.
        self.root_builder = self.builder
        self.subgraph: Subgraph | None = None
        self.side_effects = SideEffects()
        # What this trace knows of each ContextVar it used (variables/context_vars.py), by the variable's id.
        self.context_vars: dict[int, Any] = {}
        self.guard_requests: list[tuple[str, Path, tuple[Any, ...]]] = []
        self.inputs: list[tuple[Path, torch.Tensor, TensorVar]] = []
        # Each node's tensor layout (sizes, strides, storage offset) when it was recorded (an input's: as the
        # frame received it): an in-place metadata op (``x.t_()``) later changes its example value's, which the
        # node must not show to backends (see compile).
        self._recorded_layouts: dict[torch.fx.Node, tuple[Any, ...]] = {}
        # Nodes the graph made whose layout an in-place op changed later (returned detached, see compile)
        self.relaid: set[torch.fx.Node] = set()
        # What the graph does to each input's memory (by real storage: "data" written, "view" changed in
        # place); see check_input_effects.
        self.input_effects: dict[int, set[str]] = {}
        # Each node whose op saved a tensor for its backward, with that (fake) tensor, by the tensor's storage (see
        # check_input_effects). Holding the tensor keeps its storage's number from naming another storage.
        self.saved_for_backward: dict[int, list[tuple[torch.fx.Node, torch.Tensor]]] = {}
        self.aliases: list[tuple[Path, Path]] = []
        # Closure cells of functions guarded by their code, not their identity (made anew on every call): each
        # with the path reaching the cell object and the function's tracker (``cells_by_code``), and the frame's
        # own cells (path None) and the cells it takes as arguments, whose identity relations guards state.
        self.cell_paths: list[tuple[Any, Path | None, Any]] = []
        self.wrapped: dict[int, tuple[Any, VT]] = {}
        # Pairs of paths to objects the trace answered ``is`` for as different objects (see ops.identical).
        self.apart: dict[tuple[Path, Path], None] = {}
        self.code_guarded: set[int] = set()  # functions whose __code__ a guard checks (see UserFunctionVar.call)
        self._by_id: dict[int, TensorVar] = {}
        self._attr_names: dict[int, TensorVar] = {}
        self.module_tensors: list[tuple[Path, torch.Tensor, TensorVar]] = []  # get_attr'ed, as ``inputs``
        self._cells: dict[int, Any] = {}
        self._module_stack: list[tuple[str, tuple[str, type]]] = []
        self.current_tx: Tracer | None = None
        self.grad_at_start = torch.is_grad_enabled()  # the frame's grad mode when it starts
        self.grad_at_call: bool | None = None  # the grad mode the graph is compiled and called in, if not that one
        self.changes_grad_mode = False  # whether the compiled graph holds grad-mode changes (set by ``compile``)
        # Frame tensors an in-place op the graph drops, or undoes, moved the version of in eager (see
        # autograd_replay.check_kept_layout): by memory, their paths; the version moves on before the graph runs.
        self.versions_moved_on: dict[int, Path] = {}
        self.made_no_grad_views = False  # see autograd_replay.check_no_grad_view
        self.n_ops = 0
        # Whether the trace took an answer only tracing gives (``torch.compiler.is_compiling()`` is True).
        self.compile_only_answers = False
        # Real context managers (autocast) tracing entered and has not left yet; see leave_entered.
        self.entered: list[Any] = []
        # Devices whose default autocast dtype the trace took (it is baked into the graph; GLOBAL_STATE checks it).
        self.autocast_dtype_devices: dict[str, None] = {}
        self.shapes = shapes.ShapePlan(ctx, self.fake_mode)

    # ----------------------------------------------------------------- guards

    def guard(self, kind: str, path: Path | None, *args: Any) -> None:
        """Record a guard of ``kind`` (a dynajit.guards factory name) on the value at ``path``."""
        if path is not None:
            self.guard_requests.append((kind, path, args))

    # ----------------------------------------------------------------- inputs

    def input_tensor(self, value: torch.Tensor, path: Path | None, static: bool = False) -> TensorVar:
        """A real tensor read from the frame: a graph input (one per tensor object), guarded by TENSOR_MATCH.

        ``static``: its sizes stay static (an ndarray argument's data, whose shape its own guards fix).
        """
        if path is None:
            unsupported("a tensor that cannot be reached from the frame's arguments or globals")
        known = self._by_id.get(id(value)) or self._attr_names.get(id(value))
        if known is not None:
            # The same tensor as an input or a module's parameter or buffer read before: one node for it, and a
            # guard that both paths keep reaching one tensor.
            if known.source is not None:
                self.aliases.append((known.source, path))
            return TensorVar(known.node, known.example, path, known.cls)
        if "data" in self.input_effects.get(eager_checks.storage_key(value), ()):
            unsupported(f"{path.name()} shares memory with an input this graph has written into")
        if history_refused(value):
            raise SkipFrame(
                f"{path.name()} is a view made under no_grad or inference_mode whose base was written in place "
                "after: autograd refuses to read its history, so it cannot be faked; the frame runs in Python, where "
                "using it for gradients raises as in eager"
            )
        example: torch.Tensor
        dynamic_dims: tuple[int, ...]
        if static:
            example, dynamic_dims = self.fake_mode.from_tensor(value, static_shapes=True), ()
        else:
            example, dynamic_dims = self.shapes.fake_input(value, path)
        node = self.root_builder.placeholder(_placeholder_name(path), example_value=example)
        self._recorded_layouts[node] = layout_of(example)
        tv = TensorVar(node, example, path, type(value))
        self._by_id[id(value)] = tv
        self.inputs.append((path, value, tv))
        self.guard("tensor_match", path, value, dynamic_dims)
        if example._is_view():  # (a fake of static sizes is a view as the input is, of its kind)
            self.guard("view_kind", path, torch._C._autograd._get_creation_meta(value))
        return tv

    def input_int(self, value: int, path: Path) -> VT:
        """An int argument that varies between calls: a graph input holding a SymInt (0 and 1 stay constants)."""
        example = self.shapes.symbolic_int(value, path)
        if not isinstance(example, torch.SymInt):
            self.guard("constant_match", path, value)
            return ConstVar(value, path)
        node = self.root_builder.placeholder(_placeholder_name(path), example_value=example)
        var = SymIntVar(node, example, (path, None))
        self.inputs.append((path, value, var))  # type: ignore[arg-type]
        self.guard("type_match", path, value)
        return var

    def module_tensor(self, value: torch.Tensor, path: Path | None) -> TensorVar:
        """A parameter or buffer of a module: a get_attr node bound to the real tensor, guarded by identity and
        LAYOUT_MATCH."""
        known = self._attr_names.get(id(value))
        if known is not None:
            # Reached again by another path (weights tied between two modules): the graph holds one tensor for both
            # only while both paths reach it, so untying them recompiles.
            if known.source is not None and path is not None and path.name() != known.source.name():
                self.aliases.append((known.source, path))
            return known
        if path is None:
            unsupported("a module parameter that cannot be reached from the frame")
        as_input = self._by_id.get(id(value))
        if as_input is not None:  # passed in as well: the input's node, while both paths reach the one tensor
            if as_input.source is not None:
                self.aliases.append((as_input.source, path))
            return TensorVar(as_input.node, as_input.example, path, as_input.cls)
        if "data" in self.input_effects.get(eager_checks.storage_key(value), ()):
            unsupported(f"{path.name()} shares memory with an input this graph has written into")
        taken = {tv.node.target for tv in self._attr_names.values()}
        node = self.root_builder.get_attr(_unique_attr_name(path, taken), value)
        tv = TensorVar(node, node.meta["example_value"], path, type(value))
        self._attr_names[id(value)] = tv
        self.module_tensors.append((path, value, tv))
        self.guard("id_match", path, value)
        # The graph is compiled for its dtype, sizes and strides, which change in place under the same identity
        # (``param.data = ...``, ``module.double()``): a backend's kernels would read the new memory as the old.
        self.guard("layout_match", path, value)
        return tv

    def known_tensor(self, value: torch.Tensor) -> TensorVar | None:
        """The tracker of a tensor this trace already read (an input or a module tensor), else None."""
        return self._by_id.get(id(value)) or self._attr_names.get(id(value))

    def cell_for(self, cell: Any, path: Path | None) -> Any:
        from dynajit.capture._symbolic.variables import CellVar

        if id(cell) not in self._cells:
            self._cells[id(cell)] = CellVar(real=cell, source=path)
        return self._cells[id(cell)]

    # ----------------------------------------------------------------- nodes

    @contextlib.contextmanager
    def module_scope(self, module_vt: Any) -> Iterator[None]:
        cls = type(module_vt.value)
        source = module_vt.source
        path = source.name() if source is not None else cls.__name__
        key = _placeholder_name(source) if source is not None else f"{cls.__name__}_{id(module_vt.value):x}"
        self._module_stack.append((key, (path, cls)))
        try:
            yield
        finally:
            self._module_stack.pop()

    def _meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        tx = self.current_tx
        if tx is not None:
            recaptured = tx.recaptured_meta()
            if recaptured is not None:
                return dict(recaptured)
            meta["stack_trace"] = format_stack_trace(tx.user_stack())
        if self._module_stack:
            meta["nn_module_stack"] = dict(self._module_stack)
        return meta

    def to_proxy(self, vt: VT) -> Any:
        if isinstance(vt, TensorVar):
            _ = vt.example  # a graph break for a tensor whose .data this trace assigned (it reads another storage)
        if isinstance(vt, (TensorVar, SymIntVar)):
            return lifted_proxy(self, vt.node)
        if isinstance(vt, (TupleVar, ListVar)):
            return vt.kind(self.to_proxy(item) for item in vt.items)
        if isinstance(vt, SliceVar):
            return slice(*(self.to_proxy(p) for p in vt.parts))
        if isinstance(vt, DictVar):
            return {k: self.to_proxy(v) for k, v in vt.items.items()}
        if vt.is_const():
            value = vt.const()
            if isinstance(value, (int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.Size)):
                return value
            if isinstance(value, (tuple, slice, range, type(Ellipsis), torch.layout, torch.memory_format)):
                return value
        unsupported(f"passing {vt} to a torch operation")

    def call_function(self, fn: Any, args: list[VT], kwargs: dict[str, VT]) -> VT:
        if fn in OUT_OF_PLACE and args and _is_number(args[0]):
            # A number (or a SymInt) has no __iadd__: Python falls back to the binary operator, which rebinds
            # the name to a new value.
            fn = OUT_OF_PLACE[fn]
        proxies = tuple(self.to_proxy(a) for a in args)
        kw = {k: self.to_proxy(v) for k, v in kwargs.items()}
        if eager_checks.is_no_op(fn, proxies, kw):
            check_kept_layout(self, fn, proxies)
            return args[0]
        eager_checks.check_write(fn, proxies, kw)
        check_input_effects(self, fn, proxies, kw)
        eager_checks.check(fn, proxies, kw)
        check_data_error_handled(self.current_tx, fn, proxies, kw)
        result = self._record(lambda meta: self.builder.call_function(fn, proxies, kw, meta=meta), fn)
        _check_derivative(fn, result)
        return _argument_returned(fn, args, result)

    def record_node(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> VT:
        """Record ``fn`` on arguments that are already graph nodes and constants."""
        return self._record(lambda meta: self.builder.call_function(fn, args, kwargs, meta=meta), fn)

    def effect_node(self, fn: Any, args: tuple[Any, ...]) -> torch.fx.Node:
        """Record ``fn(*args)`` (constants and nodes), called for its effect on torch's state; no example value."""
        return self.builder.call_function(fn, args, meta=self._meta(), example_value=None)

    def release(self) -> None:
        """Drop the references tracing took to the frame's real objects (its tensors, wrapped objects): the
        compiled code holds none, and the trace's own reference cycles would keep them alive, past the
        point eager frees them, until the next garbage collection."""
        self.inputs.clear()
        self.saved_for_backward.clear()
        self.wrapped.clear()
        self._by_id.clear()
        self._attr_names.clear()
        self.module_tensors.clear()
        self._cells.clear()
        self.current_tx = None

    def leave_entered(self) -> None:
        """Leave, innermost first, the context managers tracing entered and did not leave (it stopped inside)."""
        while self.entered:
            self.entered.pop().__exit__(None, None, None)

    def call_method(self, name: str, args: list[VT], kwargs: dict[str, VT]) -> VT:
        proxies = tuple(self.to_proxy(a) for a in args)
        kw = {k: self.to_proxy(v) for k, v in kwargs.items()}
        if eager_checks.is_no_op(name, proxies, kw):
            check_kept_layout(self, name, proxies)
            return args[0]
        eager_checks.check_write(name, proxies, kw)
        check_input_effects(self, name, proxies, kw)
        eager_checks.check(name, proxies, kw, method=True)
        check_data_error_handled(self.current_tx, name, proxies, kw)
        result = self._record(lambda meta: self.builder.call_method(name, proxies, kw, meta=meta), name)
        _check_derivative(name, result)
        return _argument_returned(name, args, result)

    def wrote_into(self, value: torch.Tensor) -> bool:
        """Whether the graph writes into the memory of ``value``, a real tensor the frame passed in."""
        return "data" in self.input_effects.get(eager_checks.storage_key(value), ())

    def changed_layout_of(self, value: torch.Tensor) -> bool:
        """Whether the graph changes in place the layout of ``value``, a real tensor the frame passed in."""
        return "view" in self.input_effects.get(eager_checks.storage_key(value), ())

    def input_viewed_by(self, node: Any) -> tuple[Path, torch.Tensor] | None:
        """The graph input (its path and tensor) whose memory the FX node ``node``'s value views, if any."""
        inputs = [(path, value, tv.node.meta["example_value"]) for path, value, tv in self.inputs]
        return _viewed_by(node, [entry for entry in inputs if isinstance(entry[1], torch.Tensor)])

    def module_tensor_viewed_by(self, node: Any) -> tuple[Path, torch.Tensor] | None:
        """The module parameter or buffer (its path and tensor) whose memory the FX node ``node``'s value views."""
        return _viewed_by(node, [(path, value, tv.example) for path, value, tv in self.module_tensors])

    def _record(self, make: Any, what: Any) -> VT:
        saved: list[torch.Tensor] = []
        try:
            with noting_saved_tensors(saved):
                node = make(self._meta())
        except Unsupported:
            raise
        except Exception as exc:
            name = getattr(what, "__name__", what)
            reason = f"{name} cannot be traced on fake tensors ({type(exc).__name__}: {str(exc)[:200]})"
            if isinstance(exc, DynamicOutputShapeException):
                reason = f"{name}: the size of its result depends on the tensor's data ({exc.func})"
            if isinstance(exc, DataDependentOutputException):
                reason = f"{name} reads a tensor's data (set capture_scalar_outputs to trace it)"
            if _is_user_error(exc):
                raise RaisesInPython(reason) from None
            unsupported(reason)
        self.n_ops += 1
        for tensor in saved:
            self.saved_for_backward.setdefault(eager_checks.storage_key(tensor), []).append((node, tensor))
        example = node.meta.get("example_value")
        check_no_grad_view(self, node, example, what)
        check_new_leaf(node, example, what)
        if isinstance(example, torch.Tensor):
            self._recorded_layouts[node] = layout_of(example)
        bind_unbacked(self.fake_mode.shape_env, node)
        return self.wrap_result(node)

    def wrap_result(self, node: torch.fx.Node) -> VT:
        example = node.meta.get("example_value")
        if isinstance(example, torch.Tensor):
            return TensorVar(node, example)
        if is_data_dependent(example):
            return DataScalarVar(node, example, self)
        if isinstance(example, torch.SymInt):
            return SymIntVar(node, example, rebuild=self.shapes.python_of)
        if isinstance(example, torch.SymBool | torch.SymFloat):
            # Python code branches on it or computes with it as a number: specialise (the ShapeEnv keeps the guard).
            recorded = len(self.fake_mode.shape_env.guards)
            value = bool(example) if isinstance(example, torch.SymBool) else float(example)
            if any(g.expr is sympy.false for g in self.fake_mode.shape_env.guards[recorded:]):
                # (``size % 2.5``: torch's guard for the value is False) Python computes it at run time instead.
                unsupported(f"{example.node.expr} of a dynamic size has a value torch cannot guard")
            return ConstVar(value)
        if isinstance(example, (tuple, list)) and (
            not isinstance(example, torch.Size) or any(isinstance(s, torch.SymInt) for s in example)
        ):
            items: list[VT] = []
            for i, item in enumerate(example):
                if isinstance(item, torch.Tensor | torch.SymInt):
                    sub = self.builder.call_function(operator.getitem, (node, i), meta=self._meta())
                    items.append(
                        TensorVar(sub, item) if isinstance(item, torch.Tensor) else self.wrap_result(sub)  # type: ignore[arg-type]
                    )
                elif isinstance(item, (int, float, bool, type(None))):
                    items.append(ConstVar(item))
                else:
                    unsupported(f"a torch operation returned a {type(item).__name__} inside a sequence")
            if type(example).__module__ == "torch.return_types":
                return StructSeqVar(items, type(example))
            return TupleVar(items) if isinstance(example, tuple) else ListVar(items)
        if isinstance(example, (int, float, bool, type(None), torch.Size, torch.dtype, torch.device)):
            # The value is fixed by the guarded example values; the node stays for any effect it has (setitem).
            return ConstVar(example)
        unsupported(f"a torch operation returned a {type(example).__name__}")

    # ----------------------------------------------------------------- compile

    def has_ops(self) -> bool:
        return any(n.op in ("call_function", "call_method", "call_module") for n in self.builder.graph.nodes)

    def compile(self, outputs: list[TensorVar]) -> tuple[str, CompiledGraph] | None:
        """Finish the graph with ``outputs``, hand it to the backend, and name its compiled callable."""
        check_returned_views(self, outputs)
        if torch.is_inference_mode_enabled():
            self._drop_grad_mode_changes()
        else:
            self._end_in_the_grad_mode_of_its_views(outputs)
        if not self.has_ops():
            return None
        self.changes_grad_mode = any(sets_grad_mode(node) for node in self.builder.graph.nodes)
        returned = [tv.node for tv in outputs]
        bases = overlapping_view_bases(returned, self.builder.graph)
        extras = unused_value_checks(self.builder.graph, [*returned, *bases])
        self.builder.output((*returned, *bases, *extras))
        # What the graph returns and reads as it leaves them: a tensor the graph made and transposed in place is
        # no view (its recorded layout, restored below for the backend, is one of the same memory)
        returned_examples = [node.meta.get("example_value") for node in (*returned, *bases)]
        input_examples = [v.node.meta.get("example_value") for (_, _, v) in self.inputs]
        self._restore_recorded_layouts()
        gm = self.builder.build(class_name="GraphModule")
        example_inputs = [value for (_, value, _) in self.inputs]
        name = f"__compiled_fn_{next(_graph_ids)}"
        if artifact_enabled("graph_code"):
            artifact_logger("graph_code").info("TRACED GRAPH %s\n%s", name, gm.print_readable(print_output=False))
        start = time.perf_counter()
        with preserved_process_state(), compiling_outside_inference_mode(gm):
            if self.grad_at_call is not None:
                torch._C._set_grad_enabled(self.grad_at_call)
            compiled = self.ctx.backend(gm, example_inputs)
        if not callable(compiled):  # fail here, naming the backend, not at the graph's first call
            backend = self.ctx.backend
            name = getattr(backend, "__name__", None) or type(backend).__name__
            raise TypeError(f"backend {name} returned {type(compiled).__name__}, not a callable")
        seconds = time.perf_counter() - start
        if extras:
            compiled = first_outputs(compiled, len(outputs) + len(bases))
        # the checks hook the graph's own autograd node: a view rebuilt over an output gets a node of its own,
        # which Python's in-place write on the view replaces
        checks = saved_output_checks(gm.graph, _output_nodes(gm)[: len(outputs)], self.saved_for_backward)
        compiled = checking_saved_outputs(compiled, checks)
        compiled = keeping_view_kinds(compiled, returned_examples, input_examples)
        # AOT autograd returns a tensor the graph made and relaid in place (``v.transpose_(0, 1)``) as a view of
        # its own tensor; eager's is none (with gradients the graph is left to Python, see
        # ``_check_relaid_tensors_with_gradients``)
        compiled = detaching_outputs(compiled, [i for i, node in enumerate(returned) if node in self.relaid])
        if bases:
            compiled = first_outputs(compiled, len(outputs))
        if self.grad_at_call is not None or self.changes_grad_mode:
            compiled = called_in_grad_mode(compiled, self.grad_at_call)
        # The record keeps the inputs' fake values (shapes, dtypes, strides), never the caller's tensors: a
        # cache entry must not keep the first call's arguments alive.
        described = [var.node.meta.get("example_value") for (_, _, var) in self.inputs]
        return name, CompiledGraph(name, gm, compiled, described, seconds)

    def _drop_grad_mode_changes(self) -> None:
        """Drop the grad-mode changes of a graph traced under inference mode.

        There ``enable_grad`` records nothing: inference mode keeps autograd off. The graph is compiled as under
        no_grad (see ``compiling_outside_inference_mode``), where a grad-mode change would make AOT autograd
        record, and save inference tensors for a backward, which autograd refuses. The transformed code sets
        the mode the trace stopped in after the graph (see transform.py).
        """
        for node in list(self.builder.graph.nodes):
            if sets_grad_mode(node) and not node.users:
                self.builder.graph.erase_node(node)

    def _end_in_the_grad_mode_of_its_views(self, outputs: list[TensorVar]) -> None:
        """Make the graph end in the grad mode its outputs that view tensors requiring grad were made in, else
        in the mode it starts in: drop the mode changes it ends with, and set that mode last where it differs
        from the mode the ops ended in.

        AOT autograd makes the outputs that view inputs or intermediates after the graph has run, in the mode
        it ended in. A break inside a ``no_grad`` block cuts the graph inside the block: a view made before the
        block, remade under no_grad, would be a leaf of its own and the gradient would stop there. A break
        inside an ``enable_grad`` block of a frame called under no_grad: a view made in the block, remade
        under no_grad, would refuse the in-place op Python applies to it next. The transformed code sets the
        mode the trace stopped in after the graph (see transform.py). Views made under no_grad are kept only
        by graphs that start without gradients (see _check_no_grad_views); outputs made in both modes cannot
        share one ending mode, and the frame runs in Python. A graph starting without gradients that returns
        a tensor it made with them is called with gradients too: compiled as an inference graph, its ops'
        decompositions would run under autograd and their derivatives replace eager's (``var`` of one element:
        a zero gradient where eager's is NaN).
        """
        made = [tv.example for tv in outputs if tv.node.op != "placeholder"]  # (an input is returned as it is)
        views = [t for t in made if isinstance(t, torch.Tensor) and t._is_view() and t.requires_grad]
        modes = {history(view) is not None for view in views}  # a view made under no_grad has no history
        if len(modes) > 1:
            unsupported("the graph returns views of tensors requiring grad made both with and without gradients")
        wanted = modes.pop() if modes else self.grad_at_start
        graph = self.builder.graph
        for node in reversed(list(graph.nodes)):
            if node.op in ("placeholder", "get_attr"):
                continue
            if not sets_grad_mode(node) or node.users:
                break
            graph.erase_node(node)
        mode = self.grad_at_start
        for node in graph.nodes:
            if sets_grad_mode(node):
                mode = bool(node.args[0])
        if mode != wanted:
            self.effect_node(torch._C._set_grad_enabled, (wanted,))
        recorded = any(isinstance(t, torch.Tensor) and history(t) is not None for t in made)
        if not self.grad_at_start and (wanted or recorded):
            self._called_with_gradients()

    def _called_with_gradients(self) -> None:
        """Compile and call a graph of a frame entered under no_grad, which returns views made with gradients
        (in an enable_grad block a break cut), in grad mode, its first node turning the mode off for what comes
        before the block.

        Called in the frame's mode, AOT autograd would compile an inference graph (it asks the mode at compile
        time) and remake the views after the graph in the mode of the call: views made under no_grad, whose
        in-place op in the block, in Python after the break, autograd refuses.
        """
        graph = self.builder.graph
        first = next((n for n in graph.nodes if n.op not in ("placeholder", "get_attr")), None)
        if first is not None and not sets_grad_mode(first):
            with graph.inserting_before(first):
                node = graph.call_function(torch._C._set_grad_enabled, (False,))
                node.meta.update({k: v for k, v in first.meta.items() if k in ("stack_trace", "nn_module_stack")})
        self.grad_at_call = True

    def _restore_recorded_layouts(self) -> None:
        """Give each node whose tensor an in-place metadata op changed later the layout it was recorded with.

        Tracing ``x.unsqueeze_(0)`` runs it on the example value ``x``'s node holds: after the trace that
        value shows the layout the graph leaves ``x`` with. A backend reads placeholders as the inputs it is
        called with (AOT autograd then replays the change on the caller's tensor) and checks each op on its
        arguments' example values (``y.mul_(x)`` before ``x.unsqueeze_(0)`` must see ``x`` unsqueezed not yet),
        so each such node gets a view of the same fake storage with its recorded layout.
        """
        for node, layout in self._recorded_layouts.items():
            example = node.meta.get("example_value")
            if not isinstance(example, torch.Tensor) or layout_of(example) == layout:
                continue
            with self.fake_mode:
                node.meta["example_value"] = example.as_strided(*layout)


def called_in_grad_mode(compiled: Any, enabled: bool | None) -> Any:
    """``compiled``, called with grad mode ``enabled`` (None: the caller's) and left as its graph leaves it (the
    frame's code sets its own after the graph), unless it raises: then the caller's mode is back, as eager's
    with-blocks leave it when the exception leaves them (a backend running the graph's nodes as Python stopped
    at the raising op with its grad-mode changes made)."""

    def run(*args: Any) -> Any:
        previous = torch.is_grad_enabled()
        if enabled is not None:
            torch._C._set_grad_enabled(enabled)
        try:
            return compiled(*args)
        except BaseException:
            torch._C._set_grad_enabled(previous)
            raise

    return run


def sets_grad_mode(node: torch.fx.Node) -> bool:
    """Whether ``node`` is a grad-mode change the trace recorded (``torch._C._set_grad_enabled``)."""
    return node.op == "call_function" and node.target is torch._C._set_grad_enabled


def _check_derivative(target: Any, result: VT) -> None:
    """Leave to Python an op that has no derivative (``x // 3`` of a tensor requiring grad).

    Eager gives its result a backward that raises only if a backward reaches it; AOT autograd differentiates
    every output when it compiles, and would fail on it.
    """
    example = result.example if isinstance(result, TensorVar) else None
    if isinstance(example, torch.Tensor) and type(history(example)).__name__ == "NotImplemented":
        name = getattr(target, "__name__", target)
        unsupported(f"{name} has no derivative for an input requiring grad: it runs in Python")


def _argument_returned(target: Any, args: list[VT], result: VT) -> VT:
    """The argument's own variable when an out-of-place op returned that very tensor (``contiguous`` of a
    contiguous tensor, ``to`` its own dtype): eager's result *is* the argument, so a later in-place layout
    change (``unsqueeze_``) of either name shows through the other. In-place ops keep their own node, and the
    result of one on a frame's tensor is that tensor object, reached by its path: eager's ``x.mul_(3)`` returns
    ``x`` itself (``is``, its attributes), where a backend may return a new tensor over its memory."""
    if not isinstance(result, TensorVar):
        return result
    if str(getattr(target, "__name__", target)).endswith("_"):
        written = args[0] if args else None
        if isinstance(written, TensorVar) and written.source is not None and written.example is result.example:
            return TensorVar(result.node, result.example, written.source, written.cls)
        return result
    return next((a for a in args if isinstance(a, TensorVar) and a.example is result.example), result)


def _output_nodes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The nodes ``gm`` returns, in order (its output node's tuple)."""
    return list(next(n for n in reversed(gm.graph.nodes) if n.op == "output").args[0])


def _is_number(vt: VT) -> bool:
    return isinstance(vt, SymIntVar) or (vt.is_const() and type(vt.const()) in (int, float, bool, complex))


def _placeholder_name(path: Path) -> str:
    """``path`` as an identifier's characters (``L['self'].fc1`` is ``L_self_fc1``), runs of ``_`` collapsed.

    Every character an identifier cannot hold becomes ``_``: module names need not be identifiers
    (``add_module("block1-0", ...)``), and graph attribute names must be.
    """
    text = "".join(ch if f"_{ch}".isidentifier() else "_" for ch in path.name())
    return "_".join(part for part in text.split("_") if part) or "input"


def _unique_attr_name(path: Path, taken: set[Any]) -> str:
    """A flat attribute name for a module tensor (``L_self_fc1_weight``), unique in the graph module."""
    base = _placeholder_name(path)
    base = base if base[0].isalpha() and not keyword.iskeyword(base) else f"p_{base}"
    name, suffix = base, 0
    while name in taken:
        suffix += 1
        name = f"{base}_{suffix}"
    return name


# What the fake tensors cannot do, as opposed to what the operation itself refuses (which eager refuses too).
_FAKE_LIMITS = (
    NotImplementedError,
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
    UnsupportedFakeTensorException,
)


def _is_user_error(exc: Exception) -> bool:
    """True when an operation failed on fake tensors because its inputs are wrong (a shape mismatch, ...)."""
    return isinstance(exc, (RuntimeError, ValueError, IndexError, TypeError)) and not isinstance(exc, _FAKE_LIMITS)


def _viewed_by(node: Any, entries: list[tuple[Path, torch.Tensor, Any]]) -> tuple[Path, torch.Tensor] | None:
    """The (path, tensor) of the first of ``entries`` (path, real tensor, its fake) whose memory the FX node
    ``node``'s value views."""
    example = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
    if not isinstance(example, torch.Tensor):
        return None
    key = eager_checks.storage_key(example)
    return next(((path, value) for path, value, fake in entries if eager_checks.storage_key(fake) == key), None)
