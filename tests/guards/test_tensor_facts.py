"""The tensor facts reader (``_tensor_facts.cpp``) against Python's reads of the same facts.

For every fact it answers (dtype, device, requires_grad, sizes, strides, storage offset), on tensors of many
layouts and on changed parameters, the reader gives Python's answer or says it does not know (-1), and says
so wherever Python's read could differ from the TensorImpl's: a subclass, a torch function mode, a layout
without strides, a value that is no tensor. Guard sets compiled with the reader answer as those without it.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch.overrides import TorchFunctionMode

from dynajit.guards import AttrSource, GuardSet, LocalSource, _program, id_match, layout_match, tensor_match
from dynajit.guards._native import machine_module, tensor_facts_module

X = LocalSource("x")
DTYPE, IS_CPU, REQUIRES_GRAD, SIZES, STRIDES, OFFSET = range(1, 7)


@pytest.fixture(scope="module")
def reader() -> Any:
    module = tensor_facts_module(wait=True)
    if module is None or machine_module(wait=True) is None:
        pytest.skip("the tensor facts reader cannot be built here (no C++ compiler, or torch's headers)")
    return module


def _python_fact(value: Any, fact: int, expected: Any) -> int:
    """Python's answer, as the guard's check reads it (an exception answers no)."""
    reads = {
        DTYPE: lambda: value.dtype is expected,
        IS_CPU: lambda: bool(value.is_cpu),
        REQUIRES_GRAD: lambda: value.requires_grad is expected,
        SIZES: lambda: value.shape == expected,
        STRIDES: lambda: value.stride() == expected,
        OFFSET: lambda: value.storage_offset() == expected,
    }
    try:
        return int(reads[fact]())
    except Exception:
        return 0


def _tensors() -> list[torch.Tensor]:
    base = torch.randn(4, 6)
    with torch.inference_mode():
        inference = torch.ones(3)
    return [
        base,
        base.t(),
        base[1:, ::2],
        torch.tensor(3.0),
        torch.zeros(0, 5),
        torch.ones(2, 3, dtype=torch.float64),
        torch.arange(6),
        torch.ones(3, dtype=torch.bool),
        torch.nn.Parameter(torch.randn(3, 4)),
        torch.nn.Parameter(torch.randn(3, 4), requires_grad=False),
        torch.randn(2, 3, requires_grad=True),
        torch.ones(2, 3, device="meta"),
        inference,
        torch.ones(2, 2)._neg_view(),
    ]


def _expectations(t: torch.Tensor) -> list[tuple[int, Any]]:
    """Each fact against the tensor's own value and against others."""
    sizes, strides = tuple(t.shape), tuple(t.stride())
    return [
        (DTYPE, t.dtype), (DTYPE, torch.float16), (DTYPE, torch.int64),
        (IS_CPU, None),
        (REQUIRES_GRAD, t.requires_grad), (REQUIRES_GRAD, not t.requires_grad),
        (SIZES, sizes), (SIZES, (*sizes, 1)), (SIZES, tuple(s + 1 for s in sizes)), (SIZES, ()),
        (STRIDES, strides), (STRIDES, strides[::-1]), (STRIDES, (*strides, 1)), (STRIDES, (2**70,) * len(strides)),
        (OFFSET, t.storage_offset()), (OFFSET, t.storage_offset() + 1),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(len(_tensors())))
def test_the_reader_answers_as_python_for_tensors_and_parameters(reader, index):
    t = _tensors()[index]
    for fact, expected in _expectations(t):
        assert reader.read(t, fact, expected) == _python_fact(t, fact, expected), (fact, expected)


class _Subclass(torch.Tensor):
    pass


class _ShapeOverride(torch.Tensor):
    @property
    def shape(self) -> Any:  # type: ignore[override]
        return (1, 2, 3)


def test_the_reader_leaves_to_python_what_python_might_read_otherwise(reader):
    plain = torch.randn(2, 3)
    assert reader.read(plain, SIZES, (2, 3)) == 1
    unknown = [
        torch.randn(2, 3).as_subclass(_Subclass),
        torch.randn(2, 3).as_subclass(_ShapeOverride),
        torch.randn(3, 3).to_sparse(),  # (its TensorImpl has strides where Python raises)
        [2, 3],
        None,
    ]
    for value in unknown:
        for fact, expected in [(DTYPE, torch.float32), (IS_CPU, None), (SIZES, (2, 3)), (STRIDES, (3, 1))]:
            assert reader.read(value, fact, expected) == -1, (type(value), fact)
    with TorchFunctionMode():  # (Python's getters would call the mode)
        assert reader.read(plain, DTYPE, torch.float32) == -1
    for expected in [torch.Size([2, 3]), [2, 3], (2.0, 3)]:  # (only a tuple of ints is compared here)
        assert reader.read(plain, SIZES, expected) == -1
    assert reader.read(plain, DTYPE, "float32") == -1
    assert reader.read(plain, REQUIRES_GRAD, 0) == -1
    assert reader.read(plain, OFFSET, 2**70) == 0


def _compile_both(guards: GuardSet, names: tuple[str, ...], f_globals: dict, monkeypatch) -> tuple[Any, Any]:
    """The guard set compiled with the reader and without it."""
    with_reader = guards.compile(names, f_globals)
    with monkeypatch.context() as patch:
        patch.setattr(_program, "tensor_facts_module", lambda: None)
        without = guards.compile(names, f_globals)
    return with_reader, without


def test_layout_guards_answer_with_the_reader_as_without_it(reader, monkeypatch):
    module = torch.nn.Linear(4, 3)
    weight = module.weight
    param = AttrSource(LocalSource("m"), "weight")
    guards = GuardSet([id_match(param, weight), layout_match(param, weight)])
    with_reader, without = _compile_both(guards, ("m",), {}, monkeypatch)
    ops = _program_ops(guards, ("m",), monkeypatch)
    assert ops.count(_program.OP_TENSOR_FACT) == 6, "the layout checks are not asked of the reader"

    def agree() -> bool:
        answer = with_reader.check(module)
        assert answer is without.check(module) is with_reader.python_check(module)
        return answer

    assert agree()
    original = weight.data
    changes = [
        (lambda: setattr(weight, "data", torch.randn(3, 4)), True),  # the same layout, other memory
        (lambda: setattr(weight, "data", torch.randn(4, 3).t()), False),  # strides
        (lambda: setattr(weight, "data", torch.randn(13)[1:].view(3, 4)), False),  # storage offset
        (lambda: setattr(weight, "data", torch.randn(3, 4, dtype=torch.float64)), False),  # dtype
        (lambda: setattr(weight, "data", torch.randn(3, 5)), False),  # sizes
        (lambda: weight.requires_grad_(False), False),  # requires grad
    ]
    for change, holds in changes:
        change()
        assert agree() is holds
        weight.data = original
        weight.requires_grad_(True)
        assert agree()


def test_a_subclass_input_is_checked_by_python_in_the_machine(reader, monkeypatch):
    example = torch.randn(2, 3).as_subclass(_Subclass)
    guards = GuardSet([tensor_match(X, example)])
    with_reader, without = _compile_both(guards, ("x",), {}, monkeypatch)
    for value in [example, torch.randn(3, 2).as_subclass(_Subclass).t(), torch.randn(2, 3), torch.randn(2, 4)]:
        assert with_reader.check(value) is without.check(value) is with_reader.python_check(value)
    plain = torch.randn(2, 3)
    with_reader, without = _compile_both(GuardSet([tensor_match(X, plain)]), ("x",), {}, monkeypatch)
    for compiled in [with_reader, without]:
        with _Recording() as mode:  # (under a mode, Python's reads call it: so does the machine)
            assert compiled.check(plain)
        assert mode.calls.count("getset_descriptor.__get__") == 5  # (dtype, is_cpu, layout, requires_grad, shape)
        assert "TensorBase.stride" in mode.calls


class _Recording(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls.append(getattr(func, "__qualname__", str(func)))
        return func(*args, **(kwargs or {}))


def _program_ops(guards: GuardSet, names: tuple[str, ...], monkeypatch) -> list[int]:
    """The opcodes of the guard set's machine program."""
    made: list[Any] = []
    original = _program.Program.make

    def recording(self: Any, machine: Any) -> Any:
        made.append(self)
        return original(self, machine)

    with monkeypatch.context() as patch:
        patch.setattr(_program.Program, "make", recording)
        guards.compile(names, {})
    return list(made[0].code)[::4]
