"""Bytecode generation for transformed frames: load graph inputs, call the compiled graph, rebuild Python state.

Instructions are ``bytecode.Instr`` objects assembled with the ``bytecode``
package; version differences (PRECALL in 3.11, the NULL slot's position in
3.13, LOAD_ATTR's method bit in 3.12+) are handled here and nowhere else.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Callable
from typing import Any

import bytecode
import torch

from dynajit.capture._symbolic.instructions import PY, split_local_pairs
from dynajit.capture._symbolic.paths import Attr, Closure, Item, Local, PassedCell, Path
from dynajit.capture._symbolic.variables import VT, TensorVar, is_literal, unsupported

__all__ = ["CodeGen", "assemble", "collect_tensors"]

_stash_ids = itertools.count()
GRAPH_OUT = "__dynajit_graph_out"


class CodeGen:
    """An instruction list under construction for one transformed (or resume) code object."""

    def __init__(self, code: types.CodeType, new_globals: dict[str, Any], lineno: int | None = None) -> None:
        self.code = code
        self.new_globals = new_globals
        self.lineno = lineno or code.co_firstlineno
        self.insts: list[Any] = []
        self.outputs: dict[torch.fx.Node, int] = {}
        self._cached: dict[int, str] = {}
        self._stashed: dict[int, str] = {}
        self._temps = itertools.count()
        self.cell_names: dict[int, str] = {}  # id of a frame cell's tracker -> its variable name
        # Inputs whose layout the graph changes in place (``x.transpose_(0, 1)``): their sizes read after the
        # graph are not the ones the trace's symbols stand for.
        self.layout_changed: frozenset[Any] = frozenset()

    # ----------------------------------------------------------------- raw

    def emit(self, name: str, arg: Any = bytecode.UNSET) -> None:
        self.insts.append(bytecode.Instr(name, arg, lineno=self.lineno))

    def label(self, label: bytecode.Label) -> None:
        self.insts.append(label)

    # ----------------------------------------------------------------- loads and stores

    def _is_cell(self, name: str) -> bool:
        return name in self.code.co_cellvars or name in self.code.co_freevars

    def _cell_arg(self, name: str) -> Any:
        return bytecode.FreeVar(name) if name in self.code.co_freevars else bytecode.CellVar(name)

    def load_local(self, name: str) -> None:
        if self._is_cell(name):
            self.emit("LOAD_DEREF", self._cell_arg(name))
        else:
            self.emit("LOAD_FAST", name)

    def store_local(self, name: str) -> None:
        if self._is_cell(name):
            self.emit("STORE_DEREF", self._cell_arg(name))
        else:
            self.emit("STORE_FAST", name)

    def load_cell(self, name: str) -> None:
        """Push the cell object of a cell or free variable (to build a closure)."""
        # 3.13 made LOAD_CLOSURE a pseudo-instruction: LOAD_FAST of the cell's slot pushes the cell itself.
        self.emit("LOAD_FAST" if PY >= (3, 13) else "LOAD_CLOSURE", self._cell_arg(name))

    def load_deref(self, name: str) -> None:
        self.emit("LOAD_DEREF", self._cell_arg(name))

    def load_global(self, name: str) -> None:
        self.emit("LOAD_GLOBAL", (False, name))

    def push_callable_global(self, name: str) -> None:
        """Push a global and the NULL a CALL expects with it (in this version's order)."""
        self.emit("LOAD_GLOBAL", (True, name))

    def load_attr(self, name: str) -> None:
        self.emit("LOAD_ATTR", (False, name) if PY >= (3, 12) else name)

    def load_const(self, value: Any) -> None:
        _refuse_trace_id(value)
        self.emit("LOAD_CONST", value)

    def load_const_any(self, value: Any) -> None:
        if is_literal(value):
            self.load_const(value)
        else:
            self.load_global(self.stash(value))

    def subscr(self) -> None:
        self.emit("BINARY_SUBSCR")

    def build(self, opname: str, n: int) -> None:
        self.emit(opname, n)

    def push_null(self) -> None:
        self.emit("PUSH_NULL")

    def call(self, n: int) -> None:
        if PY < (3, 12):
            self.emit("PRECALL", n)
        self.emit("CALL", n)

    def call_helper(self, fn: Callable[..., Any], emit_args: Callable[[], int]) -> None:
        """Emit ``fn(<args>)`` for a helper installed as a global of the transformed code."""
        self.push_callable_global(self.stash(fn))
        self.call(emit_args())

    def stash(self, value: Any) -> str:
        """Install ``value`` as a global of the transformed code; return its name."""
        _refuse_trace_id(value)
        key = id(value)
        if key not in self._stashed:
            name = f"__dynajit_const_{next(_stash_ids)}"
            self._stashed[key] = name
            self.new_globals[name] = value
        return self._stashed[key]

    def store_path(self, path: Path) -> None:
        """Store the value on top of the stack at ``path``."""
        if isinstance(path, Local):
            self.store_local(path.local)
        elif isinstance(path, (Closure, PassedCell)):
            self.emit("STORE_DEREF", self._cell_arg(path.var))
        elif isinstance(path, Attr):
            path.base.emit(self)
            self.emit("STORE_ATTR", path.attr)
        elif isinstance(path, Item):
            path.base.emit(self)
            self.load_const(path.key)
            self.emit("STORE_SUBSCR")
        else:
            raise TypeError(f"cannot store to {path}")

    # ----------------------------------------------------------------- values

    def new_temp(self) -> str:
        return f"__dynajit_tmp_{next(self._temps)}"

    def build_cached(self, vt: VT, build: Callable[[], None]) -> None:
        """Build a new mutable object once; later references load the same object from a temporary."""
        name = self._cached.get(id(vt))
        if name is not None:
            self.emit("LOAD_FAST", name)
            return
        build()
        name = self.new_temp()
        self._cached[id(vt)] = name
        self.emit("COPY", 1)
        self.emit("STORE_FAST", name)

    def build_object(self, vt: VT, create: Callable[[], None], fill: Callable[[str], None]) -> None:
        """Create an object once, name it, then fill it: its own contents may refer back to it."""
        name = self._cached.get(id(vt))
        if name is None:
            create()
            name = self.new_temp()
            self._cached[id(vt)] = name
            self.emit("STORE_FAST", name)
            fill(name)
        self.emit("LOAD_FAST", name)

    def load_tensor(self, tv: TensorVar) -> None:
        if tv.node in self.outputs and tv.source is None:
            self.emit("LOAD_FAST", GRAPH_OUT)
            self.load_const(self.outputs[tv.node])
            self.subscr()
        elif tv.source is not None:
            tv.source.emit(self)
        else:
            raise AssertionError(f"tensor {tv.node.name} is neither a graph output nor reachable from the frame")

    def call_graph(self, name: str, inputs: list[Path]) -> None:
        self.push_callable_global(name)
        for path in inputs:
            path.emit(self)
        self.call(len(inputs))
        self.emit("STORE_FAST", GRAPH_OUT)


def collect_tensors(values: list[VT]) -> list[TensorVar]:
    """The tensors computed by the graph that ``values`` refer to (graph outputs), in first-seen order."""
    found: dict[torch.fx.Node, TensorVar] = {}
    seen: set[int] = set()
    pending = list(values)
    while pending:
        vt = pending.pop(0)
        if vt is None or id(vt) in seen:
            continue
        seen.add(id(vt))
        if isinstance(vt, TensorVar):
            # (a frame tensor written in place is reached by its path, as the object eager returns)
            if vt.node.op not in ("placeholder", "get_attr") and vt.source is None and vt.node not in found:
                found[vt.node] = vt
            continue
        pending.extend(vt.children())
    return list(found.values())


def prefix_of(bc: bytecode.Bytecode) -> list[Any]:
    """The frame-setup instructions a code object starts with (MAKE_CELL, COPY_FREE_VARS, RESUME)."""
    prefix = []
    for item in bc:
        if isinstance(item, bytecode.Instr):
            prefix.append(item)
            if item.name == "RESUME":
                break
    return prefix


def assemble(original: bytecode.Bytecode, body: list[Any], **changes: Any) -> types.CodeType:
    """A code object with ``original``'s metadata (updated by ``changes``) and ``body`` as its instructions."""
    new = bytecode.Bytecode([part for item in body for part in split_local_pairs(item)])
    new._copy_attr_from(original)
    for key, value in changes.items():
        setattr(new, key, value)
    return new.to_code()


def _refuse_trace_id(value: Any) -> None:
    from dynajit.capture._symbolic.variables.identity import has_trace_id

    if has_trace_id(value):
        unsupported("the id() of an object made while tracing would outlive the graph (its rebuilt object differs)")
