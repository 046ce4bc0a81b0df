"""Symbolic ints: a size (or an int argument) that varies between calls, as an FX node plus its SymInt.

Arithmetic on them becomes graph nodes, so ``x.view(x.size(0) * 2, -1)`` stays
symbolic. Whenever Python needs the actual value (a branch, ``range``, a
float) the SymInt is evaluated: the ShapeEnv records the condition relied on
and capture turns it into a guard, so the answer is right for every call the
entry accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from dynajit.capture._symbolic.variables.base import VT, unsupported

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.paths import Path
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["SymIntVar"]


class SymIntVar(VT):
    """An int that is symbolic in the graph: ``node`` computes it, ``example`` is its SymInt.

    ``origin`` is how Python code reaches the same value without the graph:
    ``(tensor_path, dim)`` for a size of an input tensor, ``(path, None)`` for
    an int argument.
    """

    def __init__(
        self,
        node: torch.fx.Node,
        example: torch.SymInt,
        origin: tuple[Path, int | None] | None = None,
        rebuild: Callable[[torch.SymInt], tuple[Callable[..., int], list[tuple[Path, int | None]]] | None]
        | None = None,
    ):
        self.node = node
        self.example = example
        self.origin = origin
        self.rebuild = rebuild
        self.source = origin[0] if origin is not None and origin[1] is None else None

    def python_type(self) -> type:
        return int

    def specialize(self) -> int:
        """The value of this call, guarded: the entry is then only valid while it stays the same."""
        return int(self.example)

    def const(self) -> Any:
        # Python needs the number itself (a range, an index into a list, ...): specialise on it.
        return self.specialize()

    def truth(self, tx: Tracer) -> bool:
        return bool(self.example != 0)

    def unpack(self, tx: Tracer) -> list[VT]:
        unsupported("iteration over an int")

    def getattr(self, tx: Tracer, name: str) -> VT:
        from dynajit.capture._symbolic.variables.constant import ConstVar

        if name in ("real", "numerator"):
            return self
        if name in ("imag",):
            return ConstVar(0)
        if name == "denominator":
            return ConstVar(1)
        return ConstVar(self.specialize()).getattr(tx, name)

    def reconstruct(self, cg: CodeGen) -> None:
        if self.origin is not None:
            path, dim = self.origin
            if path in cg.layout_changed:
                unsupported(
                    f"a size of {path.name()} is needed after the graph, which changes that input's layout in place: "
                    "read after it, the size would be another dimension's"
                )
            if dim is None:
                path.emit(cg)
                return

            def load_tensor_and_dim() -> int:
                path.emit(cg)
                cg.load_const(dim)
                return 2

            cg.call_helper(torch.Tensor.size, load_tensor_and_dim)
            return
        python = self.rebuild(self.example) if self.rebuild is not None else None
        if python is None:
            cg.load_const(self.specialize())
            return
        # A computed size (``b * t``): the same arithmetic in Python on the sizes it came from.
        fn, origins = python

        def load_origins() -> int:
            for path, dim in origins:
                SymIntVar(self.node, self.example, (path, dim)).reconstruct(cg)
            return len(origins)

        cg.call_helper(fn, load_origins)

    def __repr__(self) -> str:
        return f"SymIntVar({self.node.name}: {self.example})"
