"""Written-out attention, ``softmax(q @ k.transpose(-2, -1) * scale) @ v``, rewritten as one fused call.

A model that spells attention out instead of calling ``scaled_dot_product_attention`` would
otherwise materialise the score matrix and copy q, k and v into batched-matmul layouts; the fused
CPU kernel does neither. The rewrite runs on the graph handed to the backend, before AOT autograd,
so training uses the fused kernel's own gradient. It applies only where both compute the same
function to float rounding: 4-D float32 q, k and v with equal batch and head sizes, a softmax over
the last dimension, one constant scale (on the scores or on q, or none), no mask and no dropout,
and intermediate results used nowhere else.
"""

from __future__ import annotations

import logging
import operator
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

__all__ = ["fuse_attention"]

log = logging.getLogger("dynajit.inductor_lite")
Node = torch.fx.Node

# The spellings of each operation in a captured or symbolically traced graph: call_function targets
# and call_method names.
_MATMUL: tuple[set[Any], set[str]] = ({operator.matmul, torch.matmul, torch.Tensor.matmul}, {"matmul", "__matmul__"})
_SOFTMAX: tuple[set[Any], set[str]] = (
    {torch.softmax, torch.nn.functional.softmax, torch.Tensor.softmax, torch.special.softmax},
    {"softmax"},
)
_DIV: tuple[set[Any], set[str]] = (
    {operator.truediv, torch.div, torch.true_divide, torch.Tensor.div},
    {"div", "true_divide", "__truediv__"},
)
_MUL: tuple[set[Any], set[str]] = ({operator.mul, torch.mul, torch.Tensor.mul}, {"mul", "__mul__"})
_TRANSPOSE: tuple[set[Any], set[str]] = (
    {torch.transpose, torch.Tensor.transpose, torch.swapaxes, torch.swapdims},
    {"transpose", "swapaxes"},
)


def _is(node: Any, spellings: tuple[set[Any], set[str]]) -> TypeGuard[Node]:
    if not isinstance(node, Node):
        return False
    functions, methods = spellings
    if node.op == "call_function":
        return node.target in functions
    return node.op == "call_method" and node.target in methods


def _only_feeds(node: Node, user: Node) -> bool:
    return list(node.users) == [user]


def _example(node: Any) -> Any:
    return node.meta.get("example_value", node.meta.get("val")) if isinstance(node, Node) else None


def _arg(node: Node, position: int, name: str, default: Any = None) -> Any:
    if len(node.args) > position:
        return node.args[position]
    return node.kwargs.get(name, default)


def _constant_scale(node: Node) -> tuple[Node, float] | None:
    """``(x, s)`` when ``node`` computes ``x * s`` for a Python number ``s`` (a product or a plain division)."""
    if _is(node, _DIV) and node.kwargs.get("rounding_mode") is None and len(node.args) == 2:
        x, divisor = node.args
        if isinstance(x, Node) and isinstance(divisor, (int, float)) and not isinstance(divisor, bool) and divisor:
            return x, 1.0 / divisor
    if _is(node, _MUL) and len(node.args) == 2 and not node.kwargs:
        a, b = node.args
        for x, factor in ((a, b), (b, a)):
            if isinstance(x, Node) and isinstance(factor, (int, float)) and not isinstance(factor, bool):
                return x, float(factor)
    return None


def _transposed_key(node: Any) -> Node | None:
    """``k`` when ``node`` is ``k.transpose(-2, -1)`` of a 4-D ``k`` (any spelling of the two last dimensions)."""
    if not _is(node, _TRANSPOSE) or len(node.args) != 3 or node.kwargs:
        return None
    source, a, b = node.args
    if not isinstance(a, int) or not isinstance(b, int) or {a % 4, b % 4} != {2, 3}:
        return None
    return source if isinstance(source, Node) else None


@dataclass
class _Match:
    q: Node
    k: Node
    v: Node
    scale: float
    matched: list[Node]  # the pattern's own nodes, output last


def _match(out: Node) -> _Match | None:
    if not _is(out, _MATMUL) or len(out.args) != 2 or out.kwargs:
        return None
    probs: Any = out.args[0]
    v: Any = out.args[1]
    if not _is(probs, _SOFTMAX) or not _only_feeds(probs, out) or _arg(probs, 3, "dtype") is not None:
        return None
    if _arg(probs, 1, "dim") not in (-1, 3):
        return None
    scores: Any = probs.args[0]
    scale = 1.0
    matched = [probs, out]
    scaled = _constant_scale(scores) if isinstance(scores, Node) else None
    if scaled is not None and _only_feeds(scores, probs):
        matched.insert(0, scores)
        scores, scale = scaled
    if not _is(scores, _MATMUL) or len(scores.args) != 2 or scores.kwargs or not _only_feeds(scores, matched[0]):
        return None
    q: Any = scores.args[0]
    key_t: Any = scores.args[1]
    matched.insert(0, scores)
    scaled_q = _constant_scale(q) if isinstance(q, Node) and scale == 1.0 else None
    if scaled_q is not None and _only_feeds(q, scores):
        matched.insert(0, q)
        q, scale = scaled_q
    k = _transposed_key(key_t)
    if k is None or not _only_feeds(key_t, scores):
        return None
    matched.insert(0, key_t)
    if not isinstance(q, Node) or not isinstance(v, Node) or not _same_attention(q, k, v):
        return None
    return _Match(q, k, v, scale, matched)


def _same_attention(q: Node, k: Node, v: Node) -> bool:
    """Whether the fused kernel computes what the matmuls compute: no broadcasting, float32 throughout."""
    values = [_example(n) for n in (q, k, v)]
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 and t.dtype == torch.float32 for t in values):
        return False
    qv, kv, vv = values
    pairs = [(qv.shape[0], kv.shape[0]), (qv.shape[1], kv.shape[1]), (qv.shape[3], kv.shape[3])]
    pairs += [(kv.shape[0], vv.shape[0]), (kv.shape[1], vv.shape[1]), (kv.shape[2], vv.shape[2])]
    # Only relations known without a new guard: the graph's guards were settled before it got here.
    return all(statically_known_true(a == b) for a, b in pairs)


def fuse_attention(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Return ``gm`` with each written-out attention replaced by ``scaled_dot_product_attention``.

    ``gm`` itself is left unchanged: a rewrite works on a copy. Nodes need ``example_value`` (or
    ``val``) metadata on q, k and v; without it nothing is rewritten.
    """
    matches = [m for node in gm.graph.nodes if (m := _match(node)) is not None]
    if not matches:
        return gm
    graph = torch.fx.Graph()
    copies: dict[Node, Node] = {}
    result = graph.graph_copy(gm.graph, copies)
    graph.output(result)
    for m in matches:
        out = copies[m.matched[-1]]
        q, k, v = copies[m.q], copies[m.k], copies[m.v]
        with graph.inserting_before(out):
            fused = graph.call_function(torch.nn.functional.scaled_dot_product_attention, (q, k, v), {"scale": m.scale})
        fused.meta = {key: value for key, value in out.meta.items() if key not in ("example_value", "val")}
        examples = [_example(n) for n in (m.q, m.k, m.v)]
        mode = getattr(examples[0], "fake_mode", None)
        if mode is not None:
            with mode:
                q_value, k_value, v_value = examples
                fused.meta["example_value"] = torch.nn.functional.scaled_dot_product_attention(
                    q_value, k_value, v_value, scale=m.scale
                )
        out.replace_all_uses_with(fused)
        for node in reversed(m.matched):
            graph.erase_node(copies[node])
        log.info("inductor-lite: attention at %s runs as one fused kernel (scale %g)", m.matched[-1].name, m.scale)
    return torch.fx.GraphModule(gm, graph)
