"""What AOT autograd cannot replay as eager runs it, found while tracing and left to Python (a graph break).

Autograd's rules for in-place ops and views depend on how a tensor was made: a view made under ``no_grad`` of a
tensor that requires grad is a leaf of its own; an in-place op on it, or a layout change of an input, is refused
or tracked by grad mode. AOT autograd traces inputs as fresh views, replays mutations after the forward with
gradients recorded, and rebuilds returned views from the inputs they alias, so each of these rules holds for a
compiled graph only where it is checked here: at each op (``check_input_effects``, ``check_no_grad_view``) and
for the views a graph returns (``check_returned_views``).
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch._C._autograd import CreationMeta

from dynajit.capture._symbolic import eager_checks
from dynajit.capture._symbolic.variables import TensorVar, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.paths import Path

__all__ = [
    "check_input_effects",
    "check_kept_layout",
    "check_new_leaf",
    "check_no_grad_view",
    "check_returned_views",
    "history",
    "history_refused",
    "keeping_view_kinds",
    "layout_of",
    "noting_saved_tensors",
    "overlapping_view_bases",
]


# torch before 2.14 rebuilds an output aliasing a written input, when its view ops take symbolic sizes, at the
# returned offset counted from the input's storage start (2.14 counts it from the input's own offset).
_ALIASES_REBUILT_FROM_STORAGE_START = torch.torch_version.TorchVersion(torch.__version__) < "2.14"


@contextlib.contextmanager
def noting_saved_tensors(saved: list[torch.Tensor]) -> Iterator[None]:
    """A context in which each fake tensor autograd saves for a backward is appended to ``saved``.

    Eager's backward refuses a tensor saved for it and written after (its version moved on): a write inside the
    graph is left to Python (see :func:`check_input_effects`), and a write after it into a graph output is
    checked at the backward (``saved_outputs``). Tracing keeps the user's saved-tensor hooks off (capture's
    ``_convert``); this hook, the innermost, is the only one applied while it is on.
    """
    if not torch.is_grad_enabled() or not torch._C._autograd._saved_tensors_hooks_is_enabled():  # type: ignore[attr-defined]
        yield
        return

    def note(tensor: torch.Tensor) -> torch.Tensor:
        saved.append(tensor)
        return tensor

    tracing = torch._C._autograd._saved_tensors_hooks_set_tracing(False)
    try:
        with torch.autograd.graph.saved_tensors_hooks(note, _unpacked):
            yield
    finally:
        torch._C._autograd._saved_tensors_hooks_set_tracing(tracing)


def _unpacked(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _check_out_resize(
    graph: OutputGraph, name: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Leave to Python an ``out=`` call that resizes an ``out`` the graph did not make whole: a view (eager resizes
    it over its base's memory, so the base's elements change), a graph input or a module's tensor (AOT autograd
    copies the new value back into it, which a copy cannot resize). A tensor the graph made is just replaced."""
    for node in eager_checks.resized_outs(target, args, kwargs):
        example = eager_checks.example_tensor(node)
        found = graph.input_viewed_by(node) or graph.module_tensor_viewed_by(node)
        of = f"the graph's input {found[0].name()}" if found is not None else ""
        if example is not None and (example._is_view() or _shares_memory(graph, node, example)):
            unsupported(f"{name} resizes its out= tensor, a view{' of ' + of if of else ''}, over its base's memory")
        if found is not None:
            unsupported(f"{name} resizes its out= tensor, {of}, which a copy back into it cannot")


def _shares_memory(graph: OutputGraph, node: torch.fx.Node, example: torch.Tensor) -> bool:
    """Whether another value of the graph is over ``example``'s memory: a view, whether or not the tensor says so
    (a view made under inference mode records no base)."""
    key = eager_checks.storage_key(example)
    for other in graph.builder.graph.nodes:
        value = eager_checks.example_tensor(other)
        if other is not node and value is not None and eager_checks.storage_key(value) == key:
            return True
    return False


def _op_name(node: torch.fx.Node) -> str:
    return str(getattr(node.target, "__name__", node.target))


def check_input_effects(graph: OutputGraph, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Leave to Python (a graph break) an in-place op on an input's memory that backends cannot replay.

    That is a write into an input whose memory another input shares: graph inputs are faked one by
    one (with symbolic sizes, each in a fake storage of its own) and guards say nothing of which
    inputs share memory, so a backend would read the other input (a view of an argument that crossed
    a graph break, say) as unchanged by the write, or as aliased on later calls that pass separate
    tensors. It is also a write into an input that requires grad and is not dense (a strided view of
    an activation): AOT autograd writes into a contiguous copy of such an input, so a later
    ``contiguous`` or ``reshape`` would view the copy where eager copies; a write into an input whose
    layout the graph changes in place (``x.t_()``, either order): AOT autograd then gives the input the
    layout of the graph's new value of it, not the one eager keeps; a layout change of an input while
    gradients are recorded, which AOT autograd applies after the forward, bumping the version of a tensor
    the backward may have saved (autograd then refuses the backward), or of an input that requires grad
    while they are not (an ``enable_grad`` block after it would fail to trace); a write into an input some of whose
    elements share memory (an expanded tensor), which AOT autograd copies back element by element; and a
    change of an input's memory (``resize_``). A write into an input that requires grad, with gradients
    recorded, in a graph that started without them (an ``enable_grad`` block in a frame called under
    ``no_grad``, a resume function entered inside a ``no_grad`` block) is also left to Python: AOT autograd
    then traces an inference graph, and the write's history is lost. So is a write without gradients into
    an input that requires grad and is not a leaf: eager keeps its history, where AOT autograd's inference
    graph copies the new value into it after the graph, with gradients recorded, and cuts it. Any in-place
    op on a view made without gradients of a tensor that requires grad, an input or not, is left to Python
    too: AOT autograd replays it with gradients recorded, where autograd refuses it. So is a write, outside
    inference mode, into an input that is an inference tensor: eager allows it through a dtype view
    (``x.view(torch.int32)`` is a normal tensor), but AOT autograd copies the new value into the input itself.
    """
    name = getattr(target, "__name__", target)
    if "out" in kwargs:
        _check_out_resize(graph, name, target, args, kwargs)
    if isinstance(args[0] if args else None, torch.fx.Node) and eager_checks.metadata_change(target, args) == "view":
        graph.relaid.add(args[0])
    for node in eager_checks.written(target, args, kwargs):
        example = eager_checks.example_tensor(node)
        savers = graph.saved_for_backward.get(eager_checks.storage_key(example)) if example is not None else None
        if savers:
            unsupported(
                f"{name} writes into a tensor {_op_name(savers[0][0])} saved for its backward: eager's backward refuses it "
                "(modified by an inplace operation), and AOT autograd fails to trace that backward"
            )
    change = eager_checks.metadata_change(target, args)
    if change == "view" and torch.is_grad_enabled() and _requires_grad(args[0]):
        unsupported(
            f"{name} changes the layout of a tensor that requires grad while gradients are recorded: AOT "
            "autograd gives views of it taken before the change wrong gradients, and rebuilds views taken after "
            "it from its old layout"
        )
    effects = [(node, "data") for node in eager_checks.written(target, args, kwargs)]
    effects += [(args[0], change)] if change is not None else []
    for node, effect in effects:
        if _made_without_gradients(node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None):
            unsupported(
                f"{name} changes in place a view made under no_grad or inference_mode of a tensor that requires "
                "grad: AOT autograd replays the change with gradients recorded, where autograd refuses it"
            )
        found = graph.input_viewed_by(node)
        if found is None:
            _note_module_tensor_write(graph, name, node, effect)
            continue
        path, value = found
        key = eager_checks.storage_key(value)
        if effect == "storage":
            unsupported(f"{name} changes the memory of the graph input {path.name()}")
        if effect == "data" and eager_checks.shares_elements(value):
            unsupported(f"{name} writes into the graph input {path.name()}, whose elements share memory")
        if effect == "view" and torch.is_inference_mode_enabled() and value.requires_grad and value._is_view():
            unsupported(
                f"{name} changes the layout of the graph input {path.name()}, a view that requires grad, under "
                "inference_mode: compiled as under no_grad, AOT autograd fails to replay the change on it"
            )
        if effect == "view" and value.requires_grad and not torch.is_grad_enabled():
            unsupported(
                f"{name} changes the layout of the graph input {path.name()}, which requires grad, without "
                "gradients recorded: AOT autograd traces the input as a view, which the change marks as made "
                "without gradients, and autograd then refuses any later use of it that records gradients"
            )
        if effect == "view" and torch.is_grad_enabled():
            unsupported(
                f"{name} changes the layout of the graph input {path.name()} while gradients are recorded: AOT "
                "autograd applies the change after the forward, and autograd then sees it as a write into a "
                "tensor the backward saved"
            )
        if effect == "data" and value.requires_grad and torch.is_grad_enabled() and not graph.grad_at_start:
            unsupported(
                f"{name} writes into the graph input {path.name()}, which requires grad, while gradients are "
                "recorded in a graph that started without them: AOT autograd would make an inference graph, and "
                "the write and what reads it after would lose their gradients"
            )
        if effect == "data" and _made_in_inference_mode(value):
            unsupported(
                f"{name} writes into the graph input {path.name()}, a view made under inference_mode of a normal "
                "tensor: graphs are compiled outside inference mode, where autograd refuses that write"
            )
        if effect == "data" and value.is_inference() and not torch.is_inference_mode_enabled():
            unsupported(
                f"{name} writes into the graph input {path.name()}, an inference tensor, outside inference_mode (eager "
                "allows it through a dtype view): AOT autograd copies the new value into the input itself, which "
                "autograd refuses outside inference mode"
            )
        if effect == "data" and value.requires_grad and not value.is_leaf and not torch.is_grad_enabled():
            unsupported(
                f"{name} writes into the graph input {path.name()}, which requires grad and has a history, without "
                "gradients recorded: eager keeps its history, and AOT autograd's inference graph copies the new "
                "value into it with gradients recorded, cutting it (or fails on a view)"
            )
        if effect == "data" and value.requires_grad and not eager_checks.is_dense(value):
            unsupported(
                f"{name} writes into the graph input {path.name()}, which requires grad and is not dense: AOT "
                "autograd would write into a dense copy of it, and later ops would choose by the copy's strides"
            )
        if effect == "data":
            for other_path, other in _in_memory([*graph.inputs, *graph.module_tensors], key):
                if other is not value:
                    unsupported(f"{name} writes into {path.name()}, whose memory {other_path.name()} shares")
        done = graph.input_effects.setdefault(key, set())
        done.add(effect)
        if effect == "view":
            # Changes that cancel out (`x.t_()` twice) leave AOT autograd no change to apply, which would have
            # moved the version on as eager's changes did.
            _move_version_on(graph, path, key)
        if done == {"data", "view"}:
            unsupported(f"{name}: the graph would both write into {path.name()} and change its layout in place")


def check_kept_layout(graph: OutputGraph, target: Any, args: tuple[Any, ...]) -> None:
    """An in-place layout change that leaves the layout as it is (``squeeze_`` with no size-1 dim), which the
    graph drops: eager still moves the tensor's version on, which its views and the tensors saved of it see.

    A view that requires grad of a tensor that does not (``x.detach_()`` after ``v = x[1:]``) then has its
    history rebuilt from its base's, now none; a tensor saved for a backward makes that backward refuse. On
    a graph input or module tensor the version moves on before the graph runs (the graph's later ops may save
    the tensor, as eager's did after the change), unless another input viewing its memory requires grad (the
    graph could read that view's history before the change too): then, and on a tensor the graph saved for its
    backward before the change, it is left to Python. An exported graph, run on other tensors later, drops it.
    """
    if graph.ctx.export:
        return
    name = getattr(target, "__name__", target)
    example = eager_checks.example_tensor(args[0])
    if example is not None and graph.saved_for_backward.get(eager_checks.storage_key(example)):
        unsupported(f"{name} changes nothing of a tensor saved for the backward, but eager's backward refuses it")
    found = graph.input_viewed_by(args[0]) or graph.module_tensor_viewed_by(args[0])
    if found is None:
        return
    path, value = found
    key = eager_checks.storage_key(value)
    for other_path, other in _in_memory([*graph.inputs, *graph.module_tensors], key):
        if other.requires_grad:
            unsupported(
                f"{name} changes nothing of {path.name()}, but eager moves its version on, which rebuilds the "
                f"history of {other_path.name()}, a view of its memory that requires grad"
            )
    _move_version_on(graph, path, key)


def _in_memory(entries: list[tuple[Path, Any, Any]], key: int) -> list[tuple[Path, torch.Tensor]]:
    """The paths and tensors of ``entries`` (a graph's inputs or module tensors) that lie in the memory ``key``."""
    return [(path, t) for path, t, _ in entries if isinstance(t, torch.Tensor) and eager_checks.storage_key(t) == key]


def _move_version_on(graph: OutputGraph, path: Path, key: int) -> None:
    """Move the version of the frame's tensor at ``path`` (whose memory is ``key``) on before the graph runs, as
    eager's op did before the graph's later ops saved the tensor for a backward (which checks its version)."""
    if not graph.ctx.export:
        graph.versions_moved_on.setdefault(key, path)


def _note_module_tensor_write(graph: OutputGraph, name: str, node: Any, effect: str | None) -> None:
    """Record a write into a module's parameter or buffer (BatchNorm's running statistics), whose memory the
    guards then keep apart from every input's; one an input shares now is left to Python, as between inputs."""
    found = graph.module_tensor_viewed_by(node) if effect == "data" else None
    if found is None:
        return
    path, value = found
    key = eager_checks.storage_key(value)
    for other_path, _ in _in_memory(graph.inputs, key):
        unsupported(f"{name} writes into {path.name()}, whose memory the input {other_path.name()} shares")
    graph.input_effects.setdefault(key, set()).add("data")


def check_new_leaf(node: torch.fx.Node, example: Any, what: Any) -> None:
    """Leave to Python (a graph break) a tensor the graph would make requiring grad with no history
    (``torch.ones(3, requires_grad=True)``), as TorchDynamo does. Eager's is a leaf of its own, gathering its
    gradient in ``.grad``; a backend compiles a graph whose results a leaf made inside does not make require grad,
    so they would come out without the history eager gives them. A tensor the op was given (an in-place op's,
    ``out=``'s) is no new leaf.
    """
    for tensor in _tensors_of(example):
        if (
            tensor.requires_grad
            and not tensor._is_view()
            and history(tensor) is None
            and not any(arg.meta.get("example_value") is tensor for arg in node.all_input_nodes)
        ):
            name = getattr(what, "__name__", what)
            unsupported(
                f"{name} makes a tensor that requires grad inside the graph: a leaf of its own in eager, which a "
                "compiled graph cannot make (make it outside the compiled function)"
            )


def check_no_grad_view(graph: OutputGraph, node: torch.fx.Node, example: Any, what: Any) -> None:
    """Leave to Python (a graph break) what eager does with a view made under no_grad of a tensor that
    requires grad: that view is a leaf of its own, requiring grad, with no history, so a gradient reaching
    it stays in it. The graph would differentiate through it into its base, or (functionalized) not at all.

    Made while the frame records gradients (a ``no_grad`` block inside it), the view breaks the graph: Python
    makes it. Made in a frame that started without gradients, it is kept: the graph's outputs, views among
    them, are made in the mode the graph ends in, so the graph ends before it records gradients again (the
    end of a ``no_grad`` block a resume function started in, an ``enable_grad`` block), and an op recording
    gradients on such a view breaks the graph there.
    """
    name = getattr(what, "__name__", what)
    if what is torch._C._set_grad_enabled and node.args[:1] == (True,) and graph.made_no_grad_views:
        unsupported(
            "gradients are recorded again after a view made under no_grad of a tensor that requires grad: the "
            "graph's outputs would be made recording gradients, where eager's view is a leaf of its own"
        )
    if torch.is_grad_enabled():
        # (an input is a leaf of the graph already: its gradient stays in it, as in eager)
        if any(
            arg.op != "placeholder" and _no_grad_leaf_view(arg.meta.get("example_value"))
            for arg in node.all_input_nodes
        ):
            unsupported(
                f"{name} records gradients of a view made under no_grad of a tensor that requires grad: in eager "
                "that view is a leaf of its own, and its gradient stays in it"
            )
        return
    if any(_no_grad_leaf_view(t) for t in _tensors_of(example)):
        if graph.grad_at_start:
            unsupported(
                f"{name} makes a view of a tensor that requires grad under no_grad: in eager that view is a leaf "
                "of its own that requires grad, and gradients reaching it stay in it, not in the tensor it views"
            )
        graph.made_no_grad_views = True


def check_returned_views(graph: OutputGraph, outputs: list[TensorVar]) -> None:
    """Leave to Python a graph whose returned views AOT autograd would rebuild other than eager made them."""
    _check_written_views_without_history(outputs)
    _check_views_of_no_grad_leaf_inputs(graph, outputs)
    _check_symbolic_views_of_written_inputs(graph, outputs)
    _check_relaid_tensors_with_gradients(graph, outputs)


def _check_relaid_tensors_with_gradients(graph: OutputGraph, outputs: list[TensorVar]) -> None:
    """Leave to Python a graph returning a tensor it made, requiring grad, whose layout it changed in place
    (``v = x * 2; v.t_()``): eager's is no view, AOT autograd returns a view of its own tensor, whose
    ``detach_()`` autograd refuses, and which no tensor without the history could stand for (without gradients,
    ``OutputGraph.compile`` returns it detached)."""
    for tv in outputs:
        example = tv.example
        relaid = tv.node in graph.relaid and isinstance(example, torch.Tensor)
        if relaid and example.requires_grad and not example._is_view():
            unsupported(
                "the graph returns a tensor it made that requires grad, whose layout it changed in place: "
                "AOT autograd would return a view where eager's tensor is none"
            )


def _check_written_views_without_history(outputs: list[TensorVar]) -> None:
    """Leave to Python a graph returning a view made without gradients (under no_grad or inference_mode) of a
    tensor that requires grad, when the graph wrote into its memory: AOT autograd reads that view's history
    with gradients on, which autograd refuses, and the compile would fail."""
    for tv in outputs:
        view = tv.example
        if tv.node.op == "placeholder":
            continue
        if _made_without_gradients(view) and view._version > 0:
            unsupported(
                "the graph returns a view made without gradients of a tensor that requires grad, after writing into "
                "its memory: AOT autograd cannot trace it"
            )


def _check_views_of_no_grad_leaf_inputs(graph: OutputGraph, outputs: list[TensorVar]) -> None:
    """Leave to Python a graph returning a view of an input that is a view made under no_grad of a tensor that
    requires grad (a leaf of its own in eager) when another input shares its memory (its base, say): AOT
    autograd may rebuild the output from that other input, and gradients would flow into it past the leaf.
    Every input in the view's memory is asked, whichever the graph took first (arguments are read when loaded)."""
    for tv in outputs:
        if tv.node.op == "placeholder" or not isinstance(tv.example, torch.Tensor):
            continue
        found = graph.input_viewed_by(tv.node)
        sharing = [] if found is None else _in_memory(graph.inputs, eager_checks.storage_key(found[1]))
        leaf = next((path for path, tensor in sharing if _no_grad_leaf_view(tensor)), None)
        if leaf is not None and len(sharing) > 1:
            unsupported(
                f"the graph returns a view of the memory of {leaf.name()}, a view made under no_grad of a tensor "
                "that requires grad, which another input shares: AOT autograd may rebuild it from that input, "
                "and gradients would reach what eager's leaf view keeps them from"
            )


def _check_symbolic_views_of_written_inputs(graph: OutputGraph, outputs: list[TensorVar]) -> None:
    """Leave to Python a graph returning a view with symbolic sizes of an input it writes into, when that view is
    a piece (of ``split``, ``chunk``, ``unbind`` of a tensor that requires grad: AOT autograd returns it in memory
    of its own, and with no fixed layout to rebuild it from the input, the caller's later writes into the input
    would not reach it as they reach eager's view), or with torch before 2.14 (AOT autograd rebuilds the view from
    the input at the offset the backend returned counted from the start of the input's storage, not the input's
    own, so a written ``x[1:]`` returned other elements)."""
    for tv in outputs:
        if tv.node.op == "placeholder" or not _is_symbolic(tv.example):
            continue
        found = graph.input_viewed_by(tv.node)
        if found is None or not graph.wrote_into(found[1]):
            continue
        if _view_kind(tv.example) == CreationMeta.MULTI_OUTPUT_NODE:
            unsupported(
                f"the graph returns a piece of {found[0].name()} (split, chunk or unbind of a tensor that requires "
                "grad) with symbolic sizes after writing into it: AOT autograd returns that piece in memory of its "
                "own, and it would not see the caller's later writes as eager's view does"
            )
        if _ALIASES_REBUILT_FROM_STORAGE_START:
            unsupported(
                f"the graph returns a view with symbolic sizes of {found[0].name()}, which it writes into: this "
                "torch's AOT autograd rebuilds it from the wrong offset when the input starts inside its storage"
            )
        if torch.is_inference_mode_enabled() and _piece_of(tv.node):
            unsupported(
                f"the graph returns a piece (of chunk, tensor_split) with symbolic sizes of {found[0].name()}, "
                "which it writes into, under inference mode: AOT autograd rebuilds it at its offset counted twice"
            )


def _piece_of(node: torch.fx.Node) -> bool:
    """Whether ``node``'s tensor is, or views, one of the tensors an op returns together (``chunk``, ``split``)."""
    while isinstance(node, torch.fx.Node) and node.op != "placeholder":
        if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
            if isinstance(node.args[0].meta.get("example_value"), (tuple, list)):
                return True
        node = next((a for a in node.args if isinstance(a, torch.fx.Node)), None)
    return False


def history(value: torch.Tensor) -> Any:
    """The autograd node ``value`` comes from (its ``grad_fn``), read as eager would read it after the call.

    A view whose layout changed in place rebuilds its history when read; a fake tensor's rebuild runs the view
    through the fake mode, and inference mode makes that rebuild fail where eager's real tensor reads it.
    """
    if not torch.is_inference_mode_enabled():
        return value.grad_fn
    with torch.inference_mode(False):
        return value.grad_fn


def history_refused(value: torch.Tensor) -> bool:
    """Whether autograd raises on reading ``value``'s history (its ``grad_fn``)."""
    if not value._is_view():
        return False
    try:
        history(value)  # autograd checks the view when its history is read
    except RuntimeError:
        return True
    return False


def _made_without_gradients(value: Any) -> bool:
    """Whether ``value`` is a view made under no_grad or inference_mode of a tensor that requires grad."""
    return (
        isinstance(value, torch.Tensor)
        and value._is_view()
        and value.requires_grad
        and torch._C._autograd._get_creation_meta(value) in (CreationMeta.NO_GRAD_MODE, CreationMeta.INFERENCE_MODE)
    )


def _made_in_inference_mode(value: torch.Tensor) -> bool:
    """Whether ``value`` is a view made under inference_mode of a normal tensor."""
    return value._is_view() and torch._C._autograd._get_creation_meta(value) == CreationMeta.INFERENCE_MODE


def _no_grad_leaf_view(value: Any) -> bool:
    """Whether ``value`` is a view made under no_grad of a tensor that requires grad (eager: a leaf requiring grad)."""
    return isinstance(value, torch.Tensor) and value._is_view() and value.requires_grad and history(value) is None


def _requires_grad(node: Any) -> bool:
    """Whether the FX node ``node``'s tensor requires grad."""
    value = eager_checks.example_tensor(node)
    return value is not None and value.requires_grad


def _is_symbolic(example: Any) -> bool:
    return isinstance(example, torch.Tensor) and any(
        isinstance(n, torch.SymInt) for n in (*example.shape, *example.stride(), example.storage_offset())
    )


def _tensors_of(example: Any) -> list[torch.Tensor]:
    items = example if isinstance(example, (tuple, list)) else [example]
    return [t for t in items if isinstance(t, torch.Tensor)]


def _view_kind(example: Any) -> Any:
    """How autograd made the view ``example`` (a piece of ``split``, made under ``no_grad``) when that decides
    whether autograd allows in-place ops on it: the view or its base requires grad, and the way is not the usual."""
    if not isinstance(example, torch.Tensor) or not example._is_view():
        return None
    if not (example.requires_grad or (example._base is not None and example._base.requires_grad)):
        return None
    kind = torch._C._autograd._get_creation_meta(example)
    return None if kind == torch._C._autograd.CreationMeta.DEFAULT else kind


def _overlapping_view(example: Any) -> bool:
    """Whether ``example`` is a view, some of whose elements share memory (an expand), with autograd history."""
    return (
        isinstance(example, torch.Tensor)
        and example._is_view()
        and history(example) is not None
        and eager_checks.shares_elements(example)
    )


def overlapping_view_bases(returned: list[torch.fx.Node], graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The bases, computed by the graph and not returned, of the returned views whose elements share memory.

    A backend returns such a view (``y.unsqueeze(0).expand(3, *y.shape)`` of an intermediate ``y``) from its
    autograd function as a tensor of its own, the base of its own views: an in-place op Python applies later
    to a piece of it records a write into memory its elements share, whose backward autograd refuses ("more
    than one element of the written-to tensor refers to a single memory location"), where eager's write is
    recorded into ``y``. Returned too, the base is what :func:`keeping_view_kinds` remakes the view from.
    """
    by_example = {id(node.meta.get("example_value")): node for node in graph.nodes if node.op != "placeholder"}
    bases: list[torch.fx.Node] = []
    for node in returned:
        example = node.meta.get("example_value")
        if not _overlapping_view(example):
            continue
        # (a base the graph never held, as ``conv1d``'s of an unbatched input: the view's nearest dense ancestor)
        base = by_example.get(id(example._base)) or _dense_ancestor(node)
        if base is not None and base not in returned and base not in bases:
            bases.append(base)
    return bases


def _dense_ancestor(node: torch.fx.Node) -> torch.fx.Node | None:
    """The nearest node computed by the graph that ``node``'s tensor views and whose elements share no memory."""
    while node.args and isinstance(base := node.args[0], torch.fx.Node):
        example, seen = eager_checks.example_tensor(node), eager_checks.example_tensor(base)
        if example is None or seen is None or eager_checks.storage_key(seen) != eager_checks.storage_key(example):
            return None
        if not eager_checks.shares_elements(seen):
            return base if base.op not in ("placeholder", "get_attr") else None
        node = base
    return None


def keeping_view_kinds(compiled: Any, examples: list[Any], input_examples: list[Any]) -> Any:
    """``compiled``, giving each view it returns the kind eager's view has (its creation meta), and each view
    whose elements share memory its base (see :func:`overlapping_view_bases`). Any other view eager returns is a
    view too: ``detach_()`` refuses views.

    Autograd refuses an in-place op on a piece of ``split``/``chunk``/``unbind`` of a tensor that requires
    grad, or on a view made under ``no_grad``, by that kind. A backend returns such an output as a plain view
    or as a tensor that only shares the memory of its base, on which Python's later in-place op (after a graph
    break) would compute, or as a view of a buffer of its own (a piece of an input the graph wrote into), which
    the caller's writes would not reach: each becomes a view of its base again (the graph's input or output the
    trace says it views, else itself), of eager's kind.
    """
    rebuilt = []
    for i, example in enumerate(examples):
        if not (isinstance(example, torch.Tensor) and example._is_view()):
            continue
        kind = _view_kind(example)
        plain = kind is None and not _overlapping_view(example)
        base = _base_of(example, input_examples, examples)
        layout = layout_of(example)
        # The offset counted from the base's own: TENSOR_MATCH leaves an input's storage offset free, and a later
        # input of the same layout may start elsewhere in its storage (``b[3:7]`` after ``b[1:5]``).
        anchor = None if base is None else (input_examples if base[0] == "input" else examples)[base[1]]
        if anchor is not None:
            layout = (layout[0], layout[1], layout[2] - anchor.storage_offset())
        static = all(isinstance(v, int) for v in (*layout[0], *layout[1], layout[2]))
        rebuilt.append((i, kind, base, layout if static else None, plain))
    if not rebuilt:
        return compiled

    def run(*args: Any) -> Any:
        results = list(compiled(*args))
        # under inference mode eager's view of a tensor the frame made is no view (inference tensors track none)
        inference = torch.is_inference_mode_enabled()
        for i, kind, base, layout, plain in rebuilt:
            result = results[i]
            if not isinstance(result, torch.Tensor) or (plain and inference):
                continue
            source = None if base is None else args[base[1]] if base[0] == "input" else results[base[1]]
            shared = source is not None and result.untyped_storage().data_ptr() == source.untyped_storage().data_ptr()
            if source is not None and not shared and layout is not None:
                # a view of a buffer of the backend's (the value it wrote into an input): eager's is of the base
                result = results[i] = source.as_strided(layout[0], layout[1], source.storage_offset() + layout[2])
            elif not result._is_view():
                # (with no base among them, a view of the result itself: its in-place ops are refused as eager's)
                owner = source if shared and source is not None else result
                result = results[i] = owner.as_strided(result.size(), result.stride(), result.storage_offset())
            if kind is not None:
                torch._C._autograd._set_creation_meta(result, kind)
        return results

    return run


def _base_of(view: torch.Tensor, inputs: list[Any], outputs: list[Any]) -> tuple[str, int] | None:
    """The graph input or output that is the base of ``view``, else an input that views all of that base in
    another order (eager makes the piece ``x.unbind(1)[0]`` of an input ``x = y.mT`` a view of ``y``, all of
    whose memory ``x`` is): a view rebuilt from an input that covers only part of the base (a ``select`` of it)
    would send the gradients of the rest nowhere."""
    found = next((("input", k) for k, e in enumerate(inputs) if e is view._base), None)
    found = found or next((("output", j) for j, e in enumerate(outputs) if e is view._base), None)
    related = (k for k, e in enumerate(inputs) if isinstance(e, torch.Tensor) and _covers(e, view._base))
    # (else an input, itself a piece of a base the graph never sees, whose elements hold all of the view's: the
    # view the trace made of it, as ``x.unbind(0)[-1]`` of an input ``x = y[::2]``, is rebuilt from it)
    holding = (k for k, e in enumerate(inputs) if isinstance(e, torch.Tensor) and _holds(e, view))
    return found or next((("input", k) for k in related), None) or next((("input", k) for k in holding), None)


def _holds(tensor: torch.Tensor, view: torch.Tensor) -> bool:
    """Whether every element of ``view`` is an element of ``tensor`` (both of one storage, static layouts)."""
    if _is_symbolic(view) or _is_symbolic(tensor) or view._base is None or tensor._base is not view._base:
        return False
    if view.numel() > _MAX_COMPARED_ELEMENTS or tensor.numel() > _MAX_COMPARED_ELEMENTS:
        return False
    return _element_offsets(view) <= _element_offsets(tensor)


_MAX_COMPARED_ELEMENTS = 1 << 16  # (the offsets are compared as Python sets, once per compile)


def _element_offsets(tensor: torch.Tensor) -> set[int]:
    offsets = {tensor.storage_offset()} if tensor.numel() else set()
    for size, stride in zip(tensor.shape, tensor.stride()):
        offsets = {offset + i * stride for offset in offsets for i in range(size)}
    return offsets


def _covers(view: torch.Tensor, base: torch.Tensor | None) -> bool:
    """Whether ``view`` is a view of ``base`` holding each of its elements once (a permutation of it)."""
    return bool(
        base is not None
        and view._base is base
        and not _is_symbolic(view)  # (compared, symbolic sizes would add guards after the trace is done)
        and not _is_symbolic(base)
        and view.numel() == base.numel()
        and view.storage_offset() == base.storage_offset()
        and torch._debug_has_internal_overlap(view) == torch._debug_has_internal_overlap(base) == 0
    )


def layout_of(tensor: torch.Tensor) -> tuple[Any, ...]:
    """A tensor's sizes, strides and storage offset."""
    return (tensor.size(), tensor.stride(), tensor.storage_offset())
