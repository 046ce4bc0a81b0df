"""Opcode handlers: jumps, conditional jumps, iteration; and the table of instructions that are graph breaks."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING

from dynajit.capture._frame import Unsupported
from dynajit.capture._symbolic.data_dependent import DataScalarVar
from dynajit.capture._symbolic.opcodes_ops import identical
from dynajit.capture._symbolic.registry import breaks, handler
from dynajit.capture._symbolic.variables import ConstVar, IteratorVar, TensorVar, unsupported
from dynajit.capture._symbolic.variables.iterators import iterator_of

if TYPE_CHECKING:
    from dynajit.capture._symbolic.instructions import Inst
    from dynajit.capture._symbolic.tracer import Tracer

__all__ = ["TensorBranch"]


class TensorBranch(Unsupported):
    """A conditional jump on a tensor's value: the graph is cut and each branch resumes in its own function."""


@handler("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT", "JUMP", "JUMP_NO_INTERRUPT")
def _jump(tx: Tracer, inst: Inst) -> None:
    tx.jump(inst.target)


def _conditional(tx: Tracer, inst: Inst, jump_if: bool, pop_on_jump: bool, pop_otherwise: bool) -> None:
    value = tx.stack[-1]
    if isinstance(value, TensorVar):
        raise TensorBranch("data-dependent control flow: a branch on a tensor's value")
    if isinstance(value, DataScalarVar):  # rebuilt after the graph as a Python number, which the jump then tests
        raise TensorBranch(f"data-dependent control flow: a branch on {value.example}, a value read from tensor data")
    taken = value.truth(tx) == jump_if
    if (taken and pop_on_jump) or (not taken and pop_otherwise):
        tx.pop()
    if taken:
        tx.jump(inst.target)


@handler("POP_JUMP_IF_TRUE", "POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE")
def _pop_jump_if_true(tx: Tracer, inst: Inst) -> None:
    _conditional(tx, inst, True, True, True)


@handler("POP_JUMP_IF_FALSE", "POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE")
def _pop_jump_if_false(tx: Tracer, inst: Inst) -> None:
    _conditional(tx, inst, False, True, True)


@handler("JUMP_IF_TRUE_OR_POP", until=(3, 12))
def _jump_if_true_or_pop(tx: Tracer, inst: Inst) -> None:
    _conditional(tx, inst, True, False, True)


@handler("JUMP_IF_FALSE_OR_POP", until=(3, 12))
def _jump_if_false_or_pop(tx: Tracer, inst: Inst) -> None:
    _conditional(tx, inst, False, False, True)


def _none_jump(tx: Tracer, inst: Inst, jump_if_none: bool) -> None:
    value = tx.pop()
    if identical(value, ConstVar(None)) == jump_if_none:
        tx.jump(inst.target)


@handler("POP_JUMP_IF_NONE", "POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE")
def _pop_jump_if_none(tx: Tracer, inst: Inst) -> None:
    _none_jump(tx, inst, True)


@handler("POP_JUMP_IF_NOT_NONE", "POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE")
def _pop_jump_if_not_none(tx: Tracer, inst: Inst) -> None:
    _none_jump(tx, inst, False)


@handler("TO_BOOL", since=(3, 13))
def _to_bool(tx: Tracer, inst: Inst) -> None:
    value = tx.stack[-1]
    if isinstance(value, TensorVar | DataScalarVar):
        following = tx.insts[inst.index + 1].opname if inst.index + 1 < len(tx.insts) else ""
        if following.startswith("POP_JUMP_IF"):
            return  # the jump cuts the graph; the generated code converts the real tensor there
        unsupported("converting a tensor to bool depends on its data")
    tx.stack[-1] = ConstVar(value.truth(tx))


@handler("BEFORE_WITH")
def _before_with(tx: Tracer, inst: Inst) -> None:
    from dynajit.capture._symbolic.tracer import RootTracer
    from dynajit.capture._symbolic.variables.contexts import ContextManagerVar

    manager = tx.pop()
    if isinstance(manager, ContextManagerVar):
        exit_method, entered = manager.enter(tx)
    elif _written_in_python(manager.python_type()):
        # (``contextlib.nullcontext``, a class of the program's): both methods are traced like any other call
        exit_method = manager.getattr(tx, "__exit__")
        if isinstance(tx, RootTracer):
            tx.python_with_exits.append((exit_method, tx.steps - 1))  # where a break inside the block goes
        entered = tx.call(manager.getattr(tx, "__enter__"), [], {})
    else:
        unsupported(
            f"with-blocks over {manager} are not traced (grad-mode and autocast blocks are, and context managers "
            "whose __enter__ and __exit__ are written in Python)"
        )
    tx.push(exit_method)
    tx.push(entered)


def _written_in_python(cls: type) -> bool:
    """Whether instances of ``cls`` enter and leave a with-block through Python functions of their class."""
    methods = [getattr(cls, name, None) for name in ("__enter__", "__exit__")]
    return all(isinstance(m, types.FunctionType) for m in methods)


_MAX_YIELDS = 10_000


@handler("RETURN_GENERATOR")
def _return_generator(tx: Tracer, inst: Inst) -> None:
    if tx.yielded is None:
        unsupported("generators are traced only when called from traced code")
    tx.push(ConstVar(None))  # popped by the POP_TOP that follows


@handler("YIELD_VALUE")
def _yield_value(tx: Tracer, inst: Inst) -> None:
    if tx.yielded is None:
        unsupported("generators are traced only when called from traced code")
    if len(tx.yielded) >= _MAX_YIELDS:
        unsupported(f"a generator yielded more than {_MAX_YIELDS} values while tracing")
    tx.yielded.append(tx.pop())
    tx.push(ConstVar(None))  # the value ``send`` would pass back: iteration sends None


@handler("GET_ITER", "GET_YIELD_FROM_ITER")
def _get_iter(tx: Tracer, inst: Inst) -> None:
    tx.push(iterator_of(tx, tx.pop()))  # ``yield from``'s too: a generator or iterator is its own iterator


@handler("FOR_ITER")
def _for_iter(tx: Tracer, inst: Inst) -> None:
    iterator = tx.stack[-1]
    if not isinstance(iterator, IteratorVar):
        unsupported(f"iterating over {iterator}")
    item = iterator.next()
    if item is not None:
        tx.push(item)
        return
    tx.pop()
    target = inst.target
    assert target is not None
    # 3.12 skips the END_FOR at the target; 3.13 skips END_FOR and the POP_TOP after it.
    for skipped in ("END_FOR", "POP_TOP")[: {(3, 11): 0, (3, 12): 1}.get(tx.version, 2)]:
        if target < len(tx.insts) and tx.insts[target].opname == skipped:
            target += 1
    tx.jump(target)


@handler("END_FOR", since=(3, 12))
def _end_for(tx: Tracer, inst: Inst) -> None:
    tx.pop()
    if tx.version < (3, 13):
        tx.pop()


_GENERATORS = "generators, coroutines and async code are not traced"
_EXCEPTIONS = "exception groups (except*) are handled in Python"
_SCOPE = "module- and class-level name scopes are not traced"
_PSEUDO = "a compiler pseudo-instruction: it never appears in a code object"
_INSTRUMENTED = "an instrumented instruction (sys.monitoring): it never appears in a code object's co_code"
_SPECIALISED = "an internal instruction of the interpreter: it never appears in a code object's co_code"

breaks(
    _GENERATORS,
    "GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "END_ASYNC_FOR", "BEFORE_ASYNC_WITH", "ASYNC_GEN_WRAP",
    "CLEANUP_THROW",
)  # fmt: skip


# The other exception-handling instructions are modelled in exceptions.py.
breaks(_EXCEPTIONS, "CHECK_EG_MATCH", "PREP_RERAISE_STAR")
breaks("the check of __init__'s result is not traced", "EXIT_INIT_CHECK")
breaks(
    _SCOPE,
    "LOAD_NAME", "STORE_NAME", "DELETE_NAME", "LOAD_LOCALS", "LOAD_FROM_DICT_OR_GLOBALS",
    "LOAD_FROM_DICT_OR_DEREF", "LOAD_CLASSDEREF", "SETUP_ANNOTATIONS", "LOAD_BUILD_CLASS", "IMPORT_STAR",
)  # fmt: skip
breaks("deleting globals and cells is not traced", "DELETE_GLOBAL", "DELETE_DEREF")
breaks("super() is not traced", "LOAD_SUPER_METHOD", "LOAD_ZERO_SUPER_ATTR", "LOAD_ZERO_SUPER_METHOD")
breaks("type-parameter intrinsics (CALL_INTRINSIC_2) are not traced", "CALL_INTRINSIC_2")
breaks("printing expressions is interactive-mode only", "PRINT_EXPR")
breaks(
    _PSEUDO,
    "SETUP_FINALLY", "SETUP_CLEANUP", "SETUP_WITH", "POP_BLOCK", "LOAD_CLOSURE", "STORE_FAST_MAYBE_NULL",
)  # fmt: skip
breaks(_SPECIALISED, "ENTER_EXECUTOR", "INTERPRETER_EXIT", "RESERVED", "BINARY_OP_INPLACE_ADD_UNICODE")
breaks(_INSTRUMENTED, *sorted(name for name in __import__("dis").opmap if name.startswith("INSTRUMENTED_")))
