"""GraphBuilder: how capture records placeholders, calls, attribute reads and outputs into an FX graph.

Every node gets dynajit's metadata: an ``example_value`` (a fake tensor,
computed by running the target on the arguments' fake example values unless
given), and the source keys (``stack_trace``, ``nn_module_stack``,
``source_fn_stack``) from the enclosing :meth:`GraphBuilder.node_meta` blocks
or the ``meta=`` keyword. :meth:`GraphBuilder.build` attaches the real
parameters, buffers, constants and submodules (the same objects, never
copies) and returns a ``torch.fx.GraphModule``.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import keyword
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
import torch.fx
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from dynajit.fxgraph._meta import EXAMPLE_VALUE, SOURCE_FN_STACK, copy_meta_value
from dynajit.fxgraph._powers import written_as_call
from dynajit.fxgraph._python_kernels import with_eager_views
from dynajit.fxgraph._symbolic import is_symbolic

__all__ = ["GraphBuilder", "batch_norms_in_eager_layout", "in_canonical_layout", "in_suggested_layout", "map_nodes"]

_MISSING: Any = object()

# Ops whose eager CPU kernel lays its result out in the input's suggested memory format (contiguous, or
# channels-last for a channels-last input), where the fake kernel keeps the input's strides: a transposed
# input's batch norm is contiguous in eager, and code may branch on ``is_contiguous()``.
_SUGGESTED_LAYOUT: set[Any] = {torch.batch_norm, torch.nn.functional.batch_norm, torch.native_batch_norm}


def in_suggested_layout(result: Any, input: torch.Tensor) -> Any:
    """``result`` (a tensor, or a tuple whose first item is the output) with the output laid out as eager's CPU
    batch norm lays it: in ``input``'s suggested memory format, a contiguous one with the strides ``torch.empty``
    gives (a size-1 dim's stride kept from the input made a convolution reading it choose another layout)."""
    from torch._prims_common import suggest_memory_format

    def laid_out(output: Any) -> Any:
        if not isinstance(output, torch.Tensor) or output.shape != input.shape:
            return output
        memory_format = suggest_memory_format(input)
        output = output.contiguous(memory_format=memory_format)
        return in_canonical_layout(output) if memory_format == torch.contiguous_format else output

    if isinstance(result, tuple) and result:
        return (laid_out(result[0]), *result[1:])
    return laid_out(result)


def _laid_out_as_eager(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(input: Any, *args: Any, **kwargs: Any) -> Any:
        result = fn(input, *args, **kwargs)
        return in_suggested_layout(result, input) if isinstance(input, torch.Tensor) else result

    return run


_IN_EAGER_LAYOUT = {fn: _laid_out_as_eager(fn) for fn in _SUGGESTED_LAYOUT}


def batch_norms_in_eager_layout(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` (a copy, when it has any) with each batch norm's result laid out as eager's CPU kernel lays it.

    For a backend that traces the graph with torch's meta kernels (AOT autograd): they keep a transposed input's
    strides, so a ``reshape`` of the result traced as a copy, where eager's is a view sharing its memory. At run
    time eager's result already has that layout and the added ``contiguous`` copies it (an extra copy, where the
    backend runs eager's kernels as they are).
    """
    if not any(node.op == "call_function" and node.target in _IN_EAGER_LAYOUT for node in gm.graph.nodes):
        return gm
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    for node in graph.nodes:
        if node.op == "call_function" and node.target in _IN_EAGER_LAYOUT:
            node.target = _IN_EAGER_LAYOUT[node.target]
    return torch.fx.GraphModule(gm, graph, class_name=type(gm).__name__)


def in_canonical_layout(result: Any) -> Any:
    """``result`` (a tensor, or a tuple whose first item is the output) with a contiguous output given the strides
    ``torch.empty`` gives its shape, as eager's kernels that allocate a contiguous result do.

    Only a size-1 dim lets a contiguous tensor have other strides (its stride addresses nothing), and only then
    is the layout looked at, so a graph without one gains no guard on its sizes.
    """
    from torch._prims_common import is_contiguous, make_contiguous_strides_for
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    output = result[0] if isinstance(result, tuple) and result else result
    if not isinstance(output, torch.Tensor) or not any(statically_known_true(size == 1) for size in output.shape):
        return result
    canonical = make_contiguous_strides_for(output.shape)
    if all(statically_known_true(a == b) for a, b in zip(output.stride(), canonical)) or not is_contiguous(output):
        return result
    output = output.clone(memory_format=torch.contiguous_format)
    return (output, *result[1:]) if isinstance(result, tuple) else output


_NON_IDENTIFIER = re.compile(r"\W|^(?=\d)")


def _identifier(name: str) -> str:
    """Turn ``name`` (for example ``L['x']``) into a valid Python identifier."""
    cleaned = _NON_IDENTIFIER.sub("_", name).strip("_") or "arg"
    if cleaned[0].isdigit():
        cleaned = "_" + cleaned
    if keyword.iskeyword(cleaned) or hasattr(builtins, cleaned) or cleaned == "self":
        cleaned += "_1"
    return cleaned


def map_nodes(value: Any, fn: Callable[[torch.fx.Node], Any]) -> Any:
    """Apply ``fn`` to every node in nested tuples, lists, dicts and slices; keep other leaves."""
    if isinstance(value, torch.fx.Node):
        return fn(value)
    if isinstance(value, tuple):
        mapped = [map_nodes(item, fn) for item in value]
        return type(value)(*mapped) if hasattr(value, "_fields") else tuple(mapped)
    if isinstance(value, list):
        return [map_nodes(item, fn) for item in value]
    if isinstance(value, dict):
        return {key: map_nodes(item, fn) for key, item in value.items()}
    if isinstance(value, slice):
        return slice(map_nodes(value.start, fn), map_nodes(value.stop, fn), map_nodes(value.step, fn))
    return value


def _iter_leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, tuple | list):
        for item in value:
            yield from _iter_leaves(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _iter_leaves(item)
    else:
        yield value


class GraphBuilder:
    """Build a ``torch.fx.GraphModule`` node by node, filling dynajit's node metadata.

    ``fake_mode`` is the :class:`FakeTensorMode` example values live in. When
    omitted, the builder adopts the mode of the first fake tensor it is given,
    or creates one when it first needs to fake a real tensor.
    """

    def __init__(self, fake_mode: FakeTensorMode | None = None) -> None:
        self.graph = torch.fx.Graph()
        self.fake_mode = fake_mode
        self._attrs: dict[str, Any] = {}
        self._meta_stack: list[dict[str, Any]] = [{}]
        self._output: torch.fx.Node | None = None

    # ----------------------------------------------------------------- metadata

    @contextlib.contextmanager
    def node_meta(self, **defaults: Any) -> Iterator[None]:
        """Give every node created inside the block these metadata defaults (inner blocks win).

        A ``source_fn_stack`` default is the prefix of the created nodes'
        stacks: each node appends its own ``(node_name, target)`` entry.
        """
        self._meta_stack.append({**self._meta_stack[-1], **defaults})
        try:
            yield
        finally:
            self._meta_stack.pop()

    @property
    def current_meta(self) -> dict[str, Any]:
        """The metadata defaults in force for the next node (a copy)."""
        return {key: copy_meta_value(key, value) for key, value in self._meta_stack[-1].items()}

    def _fill_meta(
        self, node: torch.fx.Node, meta: Mapping[str, Any] | None, example_value: Any, source_fn: Any
    ) -> torch.fx.Node:
        node.meta.update(self.current_meta)
        if source_fn is not None and SOURCE_FN_STACK not in (meta or {}):
            node.meta[SOURCE_FN_STACK] = [*node.meta.get(SOURCE_FN_STACK, []), (node.name, source_fn)]
        for key, value in (meta or {}).items():
            node.meta[key] = copy_meta_value(key, value)
        if example_value is not _MISSING:
            node.meta[EXAMPLE_VALUE] = example_value
        return node

    # ----------------------------------------------------------------- fake values

    def _mode(self) -> FakeTensorMode:
        if self.fake_mode is None:
            self.fake_mode = FakeTensorMode()
        return self.fake_mode

    def _adopt(self, value: Any) -> Any:
        """Make ``value``'s tensors fake tensors of this builder's mode (adopting the first mode seen)."""
        for leaf in _iter_leaves(value):
            if isinstance(leaf, FakeTensor):
                if self.fake_mode is None:
                    self.fake_mode = leaf.fake_mode
                elif leaf.fake_mode is not self.fake_mode:
                    raise ValueError(
                        "example_value is a fake tensor of another FakeTensorMode than this GraphBuilder's; "
                        "create every example value with the builder's fake_mode"
                    )
        if not any(isinstance(leaf, torch.Tensor) and not isinstance(leaf, FakeTensor) for leaf in _iter_leaves(value)):
            return value
        mode = self._mode()
        return torch.utils._pytree.tree_map_only(
            torch.Tensor, lambda t: t if isinstance(t, FakeTensor) else mode.from_tensor(t, static_shapes=True), value
        )

    def _fake_args(self, args: Any) -> Any:
        def example(node: torch.fx.Node) -> Any:
            if EXAMPLE_VALUE not in node.meta:
                raise ValueError(
                    f"node {node.name!r} has no example_value, so the builder cannot run the next op on it; "
                    "pass example_value= when creating it"
                )
            return node.meta[EXAMPLE_VALUE]

        return map_nodes(args, example)

    def _run_fake(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        fake_args, fake_kwargs = self._fake_args((args, kwargs))
        mode = self._mode()
        # Some meta kernels are written for concrete sizes (baddbmm expands its input with a C++ ``expand`` that
        # rejects symbolic ones); once the trace has size symbols, ops run through the Python dispatcher, which
        # takes their symbolic Python kernels, but for those whose results are views where eager's are not.
        symbolic = any(is_symbolic(leaf) for leaf in _iter_leaves((fake_args, fake_kwargs)))
        dispatch = contextlib.ExitStack()
        if symbolic:
            dispatch.enter_context(enable_python_dispatcher())
            dispatch.enter_context(with_eager_views())
        with mode, dispatch:
            result = fn(*fake_args, **fake_kwargs)
            if fn in _SUGGESTED_LAYOUT and fake_args and isinstance(fake_args[0], torch.Tensor):
                result = in_suggested_layout(result, fake_args[0])
        return result

    # ----------------------------------------------------------------- nodes

    def placeholder(
        self, name: str, example_value: Any = _MISSING, *, meta: Mapping[str, Any] | None = None
    ) -> torch.fx.Node:
        """Add a graph input called ``name`` (made a unique identifier); real tensors are faked."""
        node = self.graph.placeholder(_identifier(name))
        if node.name != node.target:
            node.target = node.name
        value = example_value if example_value is _MISSING else self._adopt(example_value)
        return self._fill_meta(node, meta, value, None)

    def get_attr(
        self, qualname: str, value: Any, *, meta: Mapping[str, Any] | None = None, example_value: Any = _MISSING
    ) -> torch.fx.Node:
        """Read attribute ``qualname`` (dotted for submodules); ``value`` is attached on :meth:`build`."""
        self._register_attr(qualname, value)
        node = self.graph.get_attr(qualname)
        if example_value is _MISSING:
            example_value = self._adopt(value) if isinstance(value, torch.Tensor) else value
        return self._fill_meta(node, meta, example_value, None)

    def call_function(
        self,
        target: Callable[..., Any],
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        example_value: Any = _MISSING,
        name: str | None = None,
    ) -> torch.fx.Node:
        """Call ``target(*args, **kwargs)``; args may nest nodes and constants in tuples, lists and dicts."""
        return self._add_call("call_function", target, target, args, kwargs, meta, example_value, name, target)

    def call_method(
        self,
        method: str,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        example_value: Any = _MISSING,
        name: str | None = None,
    ) -> torch.fx.Node:
        """Call ``args[0].<method>(*args[1:], **kwargs)``."""
        if not args:
            raise ValueError(f"call_method({method!r}) needs the object the method is called on as args[0]")

        def call(obj: Any, *rest: Any, **kw: Any) -> Any:
            return getattr(obj, method)(*rest, **kw)

        return self._add_call("call_method", method, call, args, kwargs, meta, example_value, name, method)

    def call_module(
        self,
        qualname: str,
        module: torch.nn.Module,
        args: tuple[Any, ...] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        example_value: Any = _MISSING,
    ) -> torch.fx.Node:
        """Call submodule ``module``, attached at ``qualname`` on :meth:`build`; it runs on fake copies of its state."""
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"call_module({qualname!r}) takes an nn.Module, got {type(module).__name__}")
        self._register_attr(qualname, module)
        run = self._fake_module_call(module)
        return self._add_call("call_module", qualname, run, args, kwargs, meta, example_value, None, type(module))

    def _add_call(
        self,
        op: str,
        target: Any,
        run: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any] | None,
        meta: Mapping[str, Any] | None,
        example_value: Any,
        name: str | None,
        source_fn: Any,
    ) -> torch.fx.Node:
        kwargs = dict(kwargs or {})
        if example_value is _MISSING:
            example_value = self._run_fake(run, tuple(args), kwargs)
        if op == "call_function":
            target = written_as_call(target, tuple(args))
        node = self.graph.create_node(op, target, tuple(args), kwargs, name=name and _identifier(name))
        return self._fill_meta(node, meta, example_value, source_fn)

    def _fake_module_call(self, module: torch.nn.Module) -> Callable[..., Any]:
        mode = self._mode()
        state = {
            **dict(module.named_parameters(remove_duplicate=False)),
            **dict(module.named_buffers(remove_duplicate=False)),
        }

        def call(*args: Any, **kwargs: Any) -> Any:
            fake_state: dict[str, torch.Tensor] = {
                name: mode.from_tensor(t, static_shapes=True) for name, t in state.items()
            }
            return torch.func.functional_call(module, fake_state, args, kwargs)

        return call

    def output(self, value: Any, *, meta: Mapping[str, Any] | None = None) -> torch.fx.Node:
        """Set the graph's result: a node, or a tuple/list (possibly nested) of nodes and constants."""
        if self._output is not None:
            raise ValueError("output() was already called on this GraphBuilder; a graph has one output")
        node = self.graph.output(value)
        self._output = node
        example = map_nodes(value, lambda n: n.meta.get(EXAMPLE_VALUE))
        return self._fill_meta(node, meta, example, None)

    # ----------------------------------------------------------------- attributes

    def _register_attr(self, qualname: str, value: Any) -> None:
        parts = qualname.split(".")
        if not all(part.isidentifier() for part in parts):
            raise ValueError(f"attribute name {qualname!r} must be dotted Python identifiers, like 'linear.weight'")
        existing = self._attrs.get(qualname, _MISSING)
        if existing is not _MISSING:
            if existing is not value:
                raise ValueError(f"attribute {qualname!r} is already bound to a different object")
            return
        for other, obj in self._attrs.items():
            if qualname.startswith(other + "."):
                self._check_nested(other, obj, qualname[len(other) + 1 :], value)
            elif other.startswith(qualname + "."):
                self._check_nested(qualname, value, other[len(qualname) + 1 :], obj)
        self._attrs[qualname] = value

    @staticmethod
    def _check_nested(outer_name: str, outer: Any, rest: str, inner: Any) -> None:
        found: Any = outer
        for part in rest.split("."):
            found = getattr(found, part, _MISSING)
            if found is _MISSING:
                break
        if found is not inner:
            raise ValueError(
                f"attribute {outer_name + '.' + rest!r} conflicts with {outer_name!r}: "
                f"{type(outer).__name__} {outer_name!r} does not hold that object at {rest!r}; use another name"
            )

    # ----------------------------------------------------------------- build

    def build(self, class_name: str = "GraphModule") -> torch.fx.GraphModule:
        """Return a ``GraphModule`` over the graph, with every attribute attached (same objects, not copies)."""
        if self._output is None:
            raise ValueError("call output() before build(): the graph has no result yet")
        root = torch.nn.Module()
        # Shorter names first, so a submodule is in place before anything read through it.
        for qualname in sorted(self._attrs, key=lambda q: q.count(".")):
            _install(root, qualname, self._attrs[qualname])
        self.graph.lint()
        return torch.fx.GraphModule(root, self.graph, class_name=class_name)


def _install(root: torch.nn.Module, qualname: str, value: Any) -> None:
    *path, field = qualname.split(".")
    owner: Any = root
    for part in path:
        child = getattr(owner, part, None)
        if child is None:
            child = torch.nn.Module()
            owner.add_module(part, child)
        owner = child
    if getattr(owner, field, None) is value:
        return
    if isinstance(value, torch.nn.Parameter):
        owner.register_parameter(field, value)
    elif isinstance(value, torch.Tensor):
        owner.register_buffer(field, value)
    elif isinstance(value, torch.nn.Module):
        owner.add_module(field, value)
    else:
        setattr(owner, field, value)
