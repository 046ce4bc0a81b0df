"""A compiled guard set as a program of the guard machine (``_vm.c``): the same checks, in the same order,
reading the same values as the generated Python check function.

Reads of arguments, attributes, items and closure cells, and identity and type checks, are instructions of
the machine; any other read or check is the Python expression the check function evaluates, compiled into a
small function the machine calls with the values it reads (a tensor's metadata, ``len(...) == n``, ...).
"""

from __future__ import annotations

import array
import re
from collections.abc import Sequence
from typing import Any

from ._guard import Check
from ._native import tensor_facts_module
from ._sources import AttrSource, ClosureSource, ItemSource, LocalSource, Source, _is_literal, _ModuleMemberSource

__all__ = ["Program"]

(
    OP_ARG,
    OP_ATTR,
    OP_ITEM,
    OP_CELL,
    OP_PYLOAD,
    OP_IS,
    OP_TYPE_IS,
    OP_WEAK_IS,
    OP_PYCHECK,
    OP_IS_NOT,
    OP_SAME,
    OP_FALSY,
    OP_CONTAINS,
    OP_LACKS,
    OP_EQ,
    OP_LEN_EQ,
    OP_METHOD,
    OP_TRUTHY,
    OP_TENSOR_FACT,
    OP_HAS_ATTR,
    OP_LACKS_ATTR,
) = range(21)

# Check templates that are single instructions: (opcode, the constant's name, or None for a second source).
_INSTRUCTIONS = {
    "{ref}() is {0} is not None": (OP_WEAK_IS, "ref"),
    "{0} is {obj}": (OP_IS, "obj"),
    "{0} is {value}": (OP_IS, "value"),
    "type({0}) is {cls}": (OP_TYPE_IS, "cls"),
    "{0} is {1}": (OP_SAME, None),
    "{member} in {0}": (OP_CONTAINS, "member"),
    "not ({member} in {0})": (OP_LACKS, "member"),
    "{0} == {value}": (OP_EQ, "value"),
    "len({0}) == {length}": (OP_LEN_EQ, "length"),
    "hasattr({0}, {member})": (OP_HAS_ATTR, "member"),
    "not (hasattr({0}, {member}))": (OP_LACKS_ATTR, "member"),
}
_NONE_CHECKS = {"{0} is None": OP_IS, "{0} is not None": OP_IS_NOT}
# ``not ({0}.a or {0}.b ...)``: no module hooks.
_NONE_TRUE = re.compile(r"not \(\{0\}\.(\w+)((?: or \{0\}\.\w+)*)\)")
# A tensor's metadata and the global state: ``{0}.dtype is {expected}``, ``{0}.stride() == {expected}``,
# ``{read}() is {expected}`` (a read of an attribute, a method or a function without arguments, then a comparison);
# ``{0}.is_cpu``: the read's truth; ``not {read}()``: its falsity.
_READ_COMPARED = re.compile(
    r"(?:\{0\}\.(?P<attr>\w+)(?P<call>\(\))?|\{(?P<fn>\w+)\}\(\)) (?P<op>is|==) \{(?P<const>\w+)\}"
)
_READ_TRUE = re.compile(r"\{0\}\.(\w+)")
_CALL_FALSE = re.compile(r"not \{(\w+)\}\(\)")
_COMPARISONS = {"is": OP_IS, "==": OP_EQ}
# Reads the tensor facts reader (``_tensor_facts.cpp``) answers: (attribute, called, comparison) -> its fact.
_TENSOR_FACTS = {
    ("dtype", False, "is"): 1,
    ("is_cpu", False, None): 2,
    ("requires_grad", False, "is"): 3,
    ("shape", False, "=="): 4,
    ("stride", True, "=="): 5,
    ("storage_offset", True, "=="): 6,
}


class Program:
    """Builds one guard machine program; ``add(check)`` in the check function's order, then ``make()``."""

    def __init__(self, ctx: Any, arg_names: Sequence[str]) -> None:
        self.ctx = ctx
        self.arg_index = {name: index for index, name in enumerate(arg_names)}
        self.code = array.array("i")
        self.consts: list[Any] = []
        self._const_of: dict[int, int] = {}
        self.registers: dict[Any, int] = {}
        # Python pieces, compiled together at the end: (constant index, source text)
        self._python: list[tuple[int, str]] = []

    def const(self, value: Any) -> int:
        index = self._const_of.get(id(value))
        if index is None:
            index = self._const_of[id(value)] = len(self.consts)
            self.consts.append(value)
        return index

    def _emit(self, op: int, dst: int = 0, a: int = 0, b: int = 0) -> None:
        self.code.extend((op, dst, a, b))

    def _python_piece(self, params: Sequence[str], expr: str) -> int:
        index = len(self.consts)
        self.consts.append(None)  # filled by make()
        self._python.append((index, f"lambda {', '.join(params)}: ({expr})"))
        return index

    def _register(self, key: Any) -> int:
        register = self.registers[key] = len(self.registers)
        return register

    def value(self, source: Source) -> int:
        """The register holding ``source``'s value, read now if it is not yet."""
        known = self.registers.get(source)
        if known is not None:
            return known
        base = self.value(source.base) if source.base is not None else -1
        if isinstance(source, LocalSource) and source.local_name in self.arg_index:
            register = self._register(source)
            self._emit(OP_ARG, register, self.arg_index[source.local_name])
        elif isinstance(source, AttrSource):
            register = self._register(source)
            self._emit(OP_ATTR, register, base, self.const(source.attr))
        elif isinstance(source, ItemSource) and _is_literal(source.key):
            register = self._register(source)
            self._emit(OP_ITEM, register, base, self.const(source.key))
        elif isinstance(source, _ModuleMemberSource):
            table = self.registers.get((base, source.table))
            if table is None:
                table = self._register((base, source.table))
                self._emit(OP_ATTR, table, base, self.const(source.table))
            register = self._register(source)
            self._emit(OP_ITEM, register, table, self.const(source.member))
        elif isinstance(source, ClosureSource):
            cell = self.ctx.closure_cell(source.free_name)  # (binds the cell: the same object the check reads)
            register = self._register(source)
            self._emit(OP_CELL, register, self.const(self.ctx.namespace[cell]))
        else:
            expr = source.access(self.ctx, "___base" if base >= 0 else None)
            piece = self._python_piece(["___base"] if base >= 0 else [], expr)
            register = self._register(source)
            self._emit(OP_PYLOAD, register, piece, base)
        return register

    def add(self, check: Check) -> None:
        """The instructions of ``check`` (its sources read first, as the check function reads them)."""
        registers = [self.value(source) for source in check.sources]
        single = _INSTRUCTIONS.get(check.template)
        if single is not None and (single[1] is None or single[1] in check.constants):
            op, name = single
            self._emit(op, 0, registers[0], registers[1] if name is None else self.const(check.constants[name]))
            return
        if check.template in _NONE_CHECKS:
            self._emit(_NONE_CHECKS[check.template], 0, registers[0], self.const(None))
            return
        if (falsy := _NONE_TRUE.fullmatch(check.template)) is not None and not check.constants:
            for name in [falsy[1], *re.findall(r"\.(\w+)", falsy[2])]:  # each read only if the ones before are empty
                value = self._register(object())
                self._emit(OP_ATTR, value, registers[0], self.const(name))
                self._emit(OP_FALSY, 0, value)
            return
        if self._read_compared(check, registers):
            return
        params = [f"___p{i}" for i in range(len(registers))]
        expr = check.render(params, {key: self.ctx.bind(value) for key, value in check.constants.items()})
        piece = self._python_piece(params, expr)
        self._emit(OP_PYCHECK, 0, piece, self.const(tuple(registers)))

    def _tensor_fact(self, register: int, read: tuple[str, bool, str | None], expected: Any) -> None:
        """Ask the tensor facts reader first, when ``read`` is one it answers: the two instructions that follow
        (the read and the comparison) run only when it cannot."""
        fact = _TENSOR_FACTS.get(read)
        if fact is not None:
            self._emit(OP_TENSOR_FACT, fact << 8 | 2, register, self.const(expected))

    def _read_compared(self, check: Check, registers: list[int]) -> bool:
        """The instructions of a check reading one value and comparing it with a constant (or testing its truth),
        if ``check`` is one."""
        if (truth := _READ_TRUE.fullmatch(check.template)) is not None and len(registers) == 1:
            self._tensor_fact(registers[0], (truth[1], False, None), None)
            value = self._register(object())
            self._emit(OP_ATTR, value, registers[0], self.const(truth[1]))
            self._emit(OP_TRUTHY, 0, value)
            return True
        if (false := _CALL_FALSE.fullmatch(check.template)) is not None and not registers:
            if false[1] not in check.constants:
                return False
            value = self._register(object())
            self._emit(OP_PYLOAD, value, self.const(check.constants[false[1]]), -1)
            self._emit(OP_FALSY, 0, value)
            return True
        found = _READ_COMPARED.fullmatch(check.template)
        if found is None or found["const"] not in check.constants:
            return False
        if found["fn"] is not None and not registers and found["fn"] in check.constants:
            value = self._register(object())
            self._emit(OP_PYLOAD, value, self.const(check.constants[found["fn"]]), -1)
        elif found["attr"] is not None and len(registers) == 1:
            expected = check.constants[found["const"]]
            self._tensor_fact(registers[0], (found["attr"], bool(found["call"]), found["op"]), expected)
            value = self._register(object())
            self._emit(OP_METHOD if found["call"] else OP_ATTR, value, registers[0], self.const(found["attr"]))
        else:
            return False
        self._emit(_COMPARISONS[found["op"]], 0, value, self.const(check.constants[found["const"]]))
        return True

    def make(self, machine: Any) -> Any:
        """The machine's callable for this program (the Python pieces compiled in the check function's namespace;
        the tensor facts reader, when it is built by now, answering the tensor checks)."""
        if self._python:
            source = "\n".join(f"___piece{index} = {text}" for index, text in self._python)
            namespace = self.ctx.namespace
            exec(compile(source, "<dynajit guard pieces>", "exec"), namespace)
            for index, _ in self._python:
                self.consts[index] = namespace.pop(f"___piece{index}")
        reader = tensor_facts_module()
        return machine.make(
            self.code.tobytes(), tuple(self.consts), len(self.registers), len(self.arg_index), reader and reader.reader
        )
