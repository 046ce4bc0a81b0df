"""Dynamic-graph checking: compile once with symbolic placeholder values, run at many sizes, compare with eager."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from dynajit.fxgraph import symbolic_fake, symbolic_int
from dynajit.inductor_lite import cache_stats, compile_fx, compiled_graphs

# One spec per graph input: {dim: range or None} for a tensor, "int" for a symbolic Python int, None for static.
Spec = Mapping[int, Any] | str | None


def symbolic_graph(
    fn: Callable[..., Any] | torch.nn.Module, inputs: Sequence[Any], specs: Sequence[Spec]
) -> tuple[torch.fx.GraphModule, FakeTensorMode]:
    """``fn`` traced with torch.fx, its placeholders carrying symbolic example values made from ``inputs``."""
    gm = torch.fx.symbolic_trace(fn)
    mode = FakeTensorMode(shape_env=ShapeEnv())
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == len(inputs)
    for k, (node, value, spec) in enumerate(zip(placeholders, inputs, specs)):
        name = f"L['a{k}']"
        if spec == "int":
            node.meta["example_value"] = symbolic_int(mode.shape_env, value, name)
        elif isinstance(value, torch.Tensor):
            node.meta["example_value"] = symbolic_fake(mode, value, name, spec or {})
        else:
            node.meta["example_value"] = value
    return gm, mode


def _clones(inputs: Sequence[Any]) -> list[Any]:
    return [i.detach().clone().requires_grad_(i.requires_grad) if isinstance(i, torch.Tensor) else i for i in inputs]


def compare(actual: Any, expected: Any, atol: float | None, rtol: float | None) -> None:
    actual, expected = pytree.tree_leaves(actual), pytree.tree_leaves(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, e.shape, a.dtype, e.dtype)
        torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True)


def check_sizes(
    fn: Callable[..., Any] | torch.nn.Module,
    make_inputs: Callable[[int], Sequence[Any]],
    specs: Sequence[Spec],
    sizes: Sequence[int] = (5, 2, 3, 7, 64, 129),
    *,
    atol: float | None = None,
    rtol: float | None = None,
    options: dict[str, Any] | None = None,
    min_kernels: int = 1,
) -> Any:
    """Compile ``fn`` once for ``make_inputs(sizes[0])`` with symbolic sizes, then compare with eager at every size.

    Asserts that no call after the first compiles a graph or builds a kernel, and returns the compiled function.
    """
    first = make_inputs(sizes[0])
    gm, _ = symbolic_graph(fn, first, specs)
    compiled = compile_fx(gm, list(first), options=options)
    graphs = compiled_graphs(compiled)
    assert graphs and all(g.info["dynamic"] for g in graphs[:1]), "the graph was not compiled as a dynamic graph"
    assert sum(g.info["kernels"] for g in graphs) >= min_kernels, [g.info for g in graphs]
    before = cache_stats()
    for size in sizes:
        inputs = make_inputs(size)
        compare(compiled(*_clones(inputs)), fn(*_clones(inputs)), atol, rtol)
    assert cache_stats() == before, "a call at a new size compiled or built something"
    assert len(compiled_graphs(compiled)) == len(graphs)
    return compiled
