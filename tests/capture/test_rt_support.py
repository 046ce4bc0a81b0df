"""A converter double for the runtime's tests: small, explicit, and honest about what it checks.

``FakeConverter`` stands in for ``dynajit.capture._convert.convert_frame``. For
each frame it records the call, hands a one-op graph of the tensor arguments
to ``ctx.backend`` (so backends count compilations), and returns transformed
code that counts its runs and then calls the original function. Its guards
check each tensor argument's dtype and shape, each int/str argument's value,
and BACKEND_MATCH through ``dynajit.capture.current_backend``.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

import dynajit.capture as capture
from dynajit.capture import _dispatch


def _describe(name: str, value: Any) -> tuple[str, Any]:
    if isinstance(value, torch.Tensor):
        return "TENSOR_MATCH", (value.dtype, tuple(value.shape))
    if isinstance(value, (int, str)):
        return "CONSTANT_MATCH", value
    return "ANY", None


class FakeCompiledGuards:
    def __init__(self, expected: dict[str, tuple[str, Any]], backend: Any) -> None:
        self.expected = expected
        self.backend = backend
        self.checks = 0

    def check(self, *values: Any) -> bool:
        # like real guards compiled by a dispatcher: without BACKEND_MATCH (the chain holds one backend's entries)
        self.checks += 1
        return self._mismatch(values) is None

    def failure_reason(self, *values: Any) -> str | None:
        if capture.current_backend() is not self.backend:
            return "backend mismatch"
        return self._mismatch(values)

    def _mismatch(self, values: tuple[Any, ...]) -> str | None:
        for (name, (kind, expected)), value in zip(self.expected.items(), values):
            got = _describe(name, value)[1]
            if kind == "TENSOR_MATCH" and got != expected:
                (old_dtype, old_shape), (new_dtype, new_shape) = expected, got
                if old_dtype != new_dtype:
                    return f"tensor '{name}' dtype {str(old_dtype)[6:]} -> {str(new_dtype)[6:]}"
                return f"tensor '{name}' size {list(old_shape)} -> {list(new_shape)}"
            if kind == "CONSTANT_MATCH" and got != expected:
                return f"'{name}' == {expected!r}, got {value!r}"
        return None


class FakeGuardSet:
    def __init__(self, expected: dict[str, tuple[str, Any]], backend: Any) -> None:
        self.expected = expected
        self.backend = backend
        self.compiled: list[FakeCompiledGuards] = []

    def compile(self, *, arg_names: tuple[str, ...], f_globals: dict, closure: dict) -> FakeCompiledGuards:
        assert tuple(arg_names) == tuple(self.expected), (arg_names, self.expected)
        compiled = FakeCompiledGuards(self.expected, self.backend)
        self.compiled.append(compiled)
        return compiled

    def __str__(self) -> str:
        lines = [f"- local '{name}' {kind}" for name, (kind, _) in self.expected.items() if kind != "ANY"]
        return "\n".join([*lines, "- global '' BACKEND_MATCH"])


@dataclass
class Conversion:
    fn: types.FunctionType
    values: tuple[Any, ...]
    ctx: Any
    runs: int = 0


def _one_op_graph(tensors: list[torch.Tensor]) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    inputs = [graph.placeholder(f"t{i}") for i in range(len(tensors))]
    graph.output(tuple(graph.call_function(torch.neg, (node,)) for node in inputs))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


@dataclass
class FakeConverter:
    """Configure per function name: ``skip`` (reason), ``skip_guarded``, ``error`` (exception), ``unsupported``."""

    skip: dict[str, str] = field(default_factory=dict)
    skip_guarded: set[str] = field(default_factory=set)
    error: dict[str, Exception] = field(default_factory=dict)
    unsupported: dict[str, str] = field(default_factory=dict)
    conversions: list[Conversion] = field(default_factory=list)

    def names(self) -> list[str]:
        return [c.fn.__name__ for c in self.conversions]

    def __call__(self, fn: types.FunctionType, values: tuple[Any, ...], ctx: Any) -> Any:
        from dynajit.capture._frame import CompiledGraph, ConvertedFrame, SkipFrame, Unsupported

        assert capture.is_compiling()
        conversion = Conversion(fn, values, ctx)
        self.conversions.append(conversion)
        name = fn.__name__
        layout = _dispatch.layout_of(fn.__code__)
        expected = {n: _describe(n, v) for n, v in zip(layout.names, values)}
        guards = FakeGuardSet(expected, ctx.backend)
        if name in self.error:
            raise self.error[name]
        if name in self.unsupported and (ctx.fullgraph or ctx.export):
            raise Unsupported(self.unsupported[name])
        if name in self.skip:
            raise SkipFrame(self.skip[name], guards if name in self.skip_guarded else None)
        tensors = [v for v in values if isinstance(v, torch.Tensor)]
        gm = _one_op_graph(tensors)
        compiled = ctx.backend(gm, tensors)
        index = len(self.conversions)
        source = (
            f"def {layout_name(fn)}({layout.params}):\n"
            f"    __rt_conversion_{index}.runs += 1\n"
            f"    return __rt_original_{index}({layout.call})\n"
        )
        namespace: dict[str, Any] = {}
        exec(compile(source, fn.__code__.co_filename, "exec"), namespace)
        code = namespace[layout_name(fn)].__code__
        original = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
        original.__kwdefaults__ = fn.__kwdefaults__
        graph = CompiledGraph("__compiled_fn_0", gm, compiled, tensors, 0.0)
        if ctx.export:
            graph = CompiledGraph("__compiled_fn_0", torch.fx.symbolic_trace(fn), compiled, tensors, 0.0)
        return ConvertedFrame(
            original_code=fn.__code__,
            code=code if not fn.__code__.co_freevars else fn.__code__,
            guards=guards,
            graphs=[graph],
            graph_breaks=[],
            new_globals={f"__rt_conversion_{index}": conversion, f"__rt_original_{index}": original},
        )


def layout_name(fn: types.FunctionType) -> str:
    return fn.__name__ if fn.__name__.isidentifier() else "transformed"


@pytest.fixture(name="converter")
def converter_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeConverter]:
    """Install a FakeConverter as ``dynajit.capture._convert`` and reset the runtime around the test."""
    fake = FakeConverter()
    module = types.ModuleType("dynajit.capture._convert")
    module.convert_frame = fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dynajit.capture._convert", module)
    monkeypatch.setattr(capture, "_convert", module, raising=False)
    capture.reset()
    yield fake
    capture.reset()


def eager_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    return gm.forward
