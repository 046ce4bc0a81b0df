"""Metadata across re-capture: map a line of a GraphModule's generated ``forward`` back to its node.

When capture traces the ``forward`` of a ``GraphModule`` (one returned by
``export`` and perhaps edited by the user), the frames it sees are lines of
generated code, not the user's program. Each generated line assigns exactly
one node (``linear = self.linear(x);  x = None``), so the line number of the
instruction being traced names the node it came from, and that node still
carries the user's ``stack_trace``, ``nn_module_stack`` and
``source_fn_stack``.
"""

from __future__ import annotations

import re
import weakref
from types import CodeType
from typing import Any

import torch.fx

from dynajit.fxgraph._meta import source_meta

__all__ = ["is_generated_forward", "line_node_map", "recapture_meta"]

# A node's line starts by assigning its name (an annotation may follow the name).
_ASSIGNMENT = re.compile(r"^\s+([A-Za-z_]\w*)\s*(?::\s*[^=]+?)?\s*=(?!=)")
_RETURN = re.compile(r"^\s+return\b")

# One map per GraphModule, valid while its generated code (a new string on every recompile) is the same.
_maps: weakref.WeakKeyDictionary[torch.fx.GraphModule, tuple[str, dict[int, torch.fx.Node]]] = (
    weakref.WeakKeyDictionary()
)


def line_node_map(gm: torch.fx.GraphModule) -> dict[int, torch.fx.Node]:
    """Map each line number of ``gm``'s generated ``forward`` (as compiled, 1-based) to the node it computes.

    The map is made on first use after each ``recompile()`` (the generated
    source is a new string every time) and kept while that code stands, so a
    line keeps naming the node its code came from even if the node is erased
    before the next recompile. Nodes erased before the first use are left out.
    """
    if not isinstance(gm, torch.fx.GraphModule):
        raise TypeError(f"line_node_map takes a torch.fx.GraphModule, got {type(gm).__name__}")
    code = gm.code
    cached = _maps.get(gm)
    if cached is not None and cached[0] is code:
        return cached[1]
    by_name = {node.name: node for node in gm.graph.nodes}
    output = next((node for node in reversed(gm.graph.nodes) if node.op == "output"), None)
    mapping: dict[int, torch.fx.Node] = {}
    for lineno, line in enumerate(code.splitlines(), start=1):
        assignment = _ASSIGNMENT.match(line)
        if assignment is not None and assignment.group(1) in by_name:
            mapping[lineno] = by_name[assignment.group(1)]
        elif output is not None and _RETURN.match(line):
            mapping[lineno] = output
    _maps[gm] = (code, mapping)
    return mapping


def recapture_meta(gm: torch.fx.GraphModule, lineno: int) -> dict[str, Any] | None:
    """The ``stack_trace`` / ``nn_module_stack`` / ``source_fn_stack`` of the node at ``lineno`` of ``gm.forward``.

    Returns a dict holding those of the three keys the node has (copies, safe
    to store on a new node), or ``None`` when no node's code is on that line or
    the node has none of them (for example a node the user inserted).
    """
    node = line_node_map(gm).get(lineno)
    if node is None:
        return None
    return source_meta(node) or None


def is_generated_forward(code: CodeType, self_obj: Any) -> bool:
    """True when ``code`` is the generated ``forward`` of the GraphModule ``self_obj`` (a frame's ``self``)."""
    return isinstance(self_obj, torch.fx.GraphModule) and getattr(type(self_obj).forward, "__code__", None) is code
