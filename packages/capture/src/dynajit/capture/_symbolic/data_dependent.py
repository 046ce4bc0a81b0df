"""Scalars read from tensor data (``Tensor.item()``, ``tolist()``, sizes of ``nonzero``) as symbolic values.

With ``config.capture_scalar_outputs`` a read of tensor data stays in the
graph: the fake tensor answers with an unbacked symbol of the ShapeEnv (a
value nothing at trace time knows), and the tracker of that value
(:class:`DataScalarVar`) flows into tensor operations, arithmetic and
comparisons as graph nodes. Python can never decide anything on it while
tracing: a branch cuts the graph as a branch on a tensor does (the jump tests
the rebuilt value), and ``int()``, ``range()`` or any other use needing the
number is a graph break naming it. ``torch._check(...)`` on it is a graph node (the
ShapeEnv also learns the fact). When such a value is needed after the graph
(returned, live at a break) the graph outputs it as a 0-d tensor and Python
reads it back with ``item()``, so the rebuilt value is exactly the graph's.

With ``config.capture_dynamic_output_shape_ops`` the ShapeEnv allows
operations whose result size depends on the data (``nonzero``, a boolean
mask): their sizes are unbacked symbols handled the same way. Conditions
torch defers to run time on such symbols are not entry guards (no input
holds them); the graph's operations check them as eager does.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch
from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings, free_unbacked_symbols

from dynajit.capture._symbolic.variables import VT, ConstVar, ListVar, TensorVar, unsupported
from dynajit.capture._symbolic.variables.symbolic import SymIntVar
from dynajit.capture.config import config

if TYPE_CHECKING:
    from dynajit.capture._symbolic.codegen import CodeGen
    from dynajit.capture._symbolic.output import OutputGraph
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["DataScalarVar", "bind_unbacked", "is_data_dependent", "read_item", "read_tolist"]

_SCALARS = (torch.SymInt, torch.SymFloat, torch.SymBool)
# What Python reads back, per kind of symbolic value, for a rebuilt value to be exactly the graph's.
_TENSOR_DTYPES = {torch.SymInt: torch.int64, torch.SymFloat: torch.float64, torch.SymBool: torch.bool}
_PYTHON_TYPES = {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}


def is_data_dependent(value: Any) -> bool:
    """True for a SymInt/SymFloat/SymBool over a symbol read from tensor data (unbacked)."""
    return isinstance(value, _SCALARS) and bool(free_unbacked_symbols(value))


class DataScalarVar(SymIntVar):
    """A number the graph reads from tensor data: ``node`` computes it, ``example`` is its unbacked symbol.

    It is a SymIntVar for the interpreter's arithmetic (operators record graph nodes); Python can
    decide nothing on it while tracing.
    """

    def __init__(self, node: torch.fx.Node, example: Any, output: OutputGraph) -> None:
        super().__init__(node, example)
        self.output = output
        self._as_tensor: TensorVar | None = None

    def python_type(self) -> type:
        return _PYTHON_TYPES[type(self.example)]

    def specialize(self) -> int:
        unsupported(f"Python needs the value of {self.example}, a number read from tensor data")

    def truth(self, tx: Tracer) -> bool:
        # Worded as the jump's own break (opcodes_control): 3.13's TO_BOOL asks for the truth value first.
        unsupported(f"data-dependent control flow: a branch on {self.example}, a value read from tensor data")

    def getattr(self, tx: Tracer, name: str) -> VT:
        unsupported(f"attribute {name!r} of {self.example}, a number read from tensor data")

    def as_tensor(self) -> TensorVar:
        """A 0-d tensor of the graph holding this value (made once, when the value must leave the graph)."""
        if self._as_tensor is None:
            dtype = _TENSOR_DTYPES[type(self.example)]
            made = self.output.call_function(torch.scalar_tensor, [self], {"dtype": ConstVar(dtype)})
            assert isinstance(made, TensorVar)
            self._as_tensor = made
        return self._as_tensor

    def children(self) -> list[VT]:
        return [self.as_tensor()]

    def reconstruct(self, cg: CodeGen) -> None:
        tensor = self.as_tensor()

        def load_tensor() -> int:
            tensor.reconstruct(cg)
            return 1

        cg.call_helper(torch.Tensor.item, load_tensor)

    def __repr__(self) -> str:
        return f"DataScalarVar({self.node.name}: {self.example})"


def bind_unbacked(shape_env: Any, node: torch.fx.Node) -> None:
    """Record which new unbacked symbols ``node``'s example value binds (as torch's tracers do).

    The ShapeEnv keeps symbols a fake operation created until something claims them; left pending, the next
    tracer of the graph (AOT autograd) would take them for its own operation's.
    """
    if not shape_env.pending_fresh_unbacked_symbols:
        return
    bindings = compute_unbacked_bindings(shape_env, node.meta.get("example_value"))
    if bindings:
        node.meta["unbacked_bindings"] = bindings


def _require_option(what: str) -> None:
    if not config.capture_scalar_outputs:
        unsupported(f"{what} reads the tensor's data (set capture_scalar_outputs to trace it)")


def read_item(tx: Tracer, tensor: TensorVar) -> VT:
    """``tensor.item()``: a graph node whose value is a symbol (a break unless capture_scalar_outputs)."""
    _require_option("Tensor.item()")
    return tx.output.call_method("item", [tensor], {})


def read_tolist(tx: Tracer, tensor: TensorVar) -> VT:
    """``tensor.tolist()``: nested lists of :func:`read_item` values (the sizes must be known while tracing)."""
    _require_option("Tensor.tolist()")
    example = tensor.example
    if any(not isinstance(size, int) for size in example.shape):
        unsupported("Tensor.tolist() of a tensor whose size is symbolic")

    def elements(vt: TensorVar, dims: tuple[int, ...]) -> VT:
        if not dims:
            return read_item(tx, vt)
        rows = [tx.output.call_function(operator.getitem, [vt, ConstVar(i)], {}) for i in range(dims[0])]
        return ListVar([elements(row, dims[1:]) for row in rows])  # type: ignore[arg-type]

    return elements(tensor, tuple(example.shape))
