"""``export``: one whole graph plus guards, or an error naming the graph break."""

from __future__ import annotations

import pytest
import torch
from test_rt_support import converter_fixture  # noqa: F401  (the converter fixture)

import dynajit.capture as capture


def test_export_returns_the_graph_and_guards_and_converts_in_export_mode(converter) -> None:
    def f(x, y):
        return torch.sin(x) + y

    x, y = torch.randn(3), torch.randn(3)
    result = capture.export(f)(x, y=y)
    assert isinstance(result, capture.ExportResult)
    torch.testing.assert_close(result.graph_module(x, y), f(x, y))
    assert "TENSOR_MATCH" in str(result.guards)
    (conversion,) = converter.conversions
    assert conversion.ctx.export and conversion.ctx.fullgraph
    assert conversion.values == (x, y)


def test_export_of_a_module_binds_self(converter) -> None:
    class M(torch.nn.Module):
        def forward(self, x, scale=2.0):
            return x * scale

    m = M()
    capture.export(m)(torch.ones(2))
    (conversion,) = converter.conversions
    assert conversion.values[0] is m and conversion.values[2] == 2.0


def test_export_graph_break_is_an_error_with_the_reason(converter) -> None:
    def g(x):
        return x

    converter.unsupported["g"] = "Tensor.item() needs the tensor's value"
    with pytest.raises(capture.ExportError, match=r"cannot export .*g' .*Tensor.item\(\)") as info:
        capture.export(g)(torch.ones(1))
    assert info.value.reason == "Tensor.item() needs the tensor's value"


def test_export_with_nothing_to_capture_is_an_error(converter) -> None:
    def h(x):
        return x

    converter.skip["h"] = "no tensor operations"
    with pytest.raises(capture.ExportError, match=r"nothing to export.*no tensor operations"):
        capture.export(h)(1)


def test_export_of_compiled_functions_and_methods_exports_the_original(converter) -> None:
    class M(torch.nn.Module):
        @capture.optimize(lambda gm, example_inputs: gm.forward)
        def forward(self, x):
            return x + 1

    m = M()
    capture.export(m)(torch.ones(2))
    capture.export(capture.optimize(lambda gm, example_inputs: gm.forward)(torch.nn.Linear.forward))
    (conversion,) = converter.conversions
    assert conversion.fn is vars(M)["forward"].__wrapped__ and conversion.values[0] is m


def test_export_rejects_non_python_callables() -> None:
    with pytest.raises(TypeError, match="export expects a Python function"):
        capture.export(torch.sin)


# The exported graph module takes exactly the user's inputs: these run the real converter and compare with eager.


def _scaled(x, y, scale=2.0):
    return x * scale + y


def _variadic(x, *args, k=3, **kw):
    return x + sum(args) * k + kw["z"]


def _keyword_only(x, *, shift=1.0, gain):
    return (x + shift) * gain


def _positional_only(x, y=None, /, z=0.5):
    return x - z if y is None else x * y - z


class _Scale(torch.nn.Module):
    def forward(self, x, scale=3.0):
        return torch.relu(x) * scale


@pytest.mark.parametrize(
    ("fn", "args", "kwargs"),
    [
        (_scaled, (torch.randn(3), torch.randn(3)), {}),
        (_scaled, (torch.randn(3), torch.randn(3), 0.5), {}),
        (_variadic, (torch.randn(3), torch.randn(3), torch.randn(3)), {"z": torch.randn(3)}),
        (_variadic, (torch.randn(3),), {"k": 2, "z": torch.randn(3)}),
        (_keyword_only, (torch.randn(2),), {"gain": torch.randn(2)}),
        (_positional_only, (torch.randn(2),), {}),
        (_positional_only, (torch.randn(2), torch.randn(2)), {"z": 1.5}),
        (_Scale(), (torch.randn(4),), {}),
    ],
    ids=[
        "default-omitted",
        "default-given",
        "varargs-and-kwargs",
        "no-extra-args",
        "keyword-only",
        "posonly",
        "posonly-given",
        "module-default",
    ],
)
def test_exported_graph_module_takes_the_user_inputs(fn, args, kwargs) -> None:
    gm = capture.export(fn)(*args, **kwargs).graph_module
    torch.testing.assert_close(gm(*args, **kwargs), fn(*args, **kwargs))


def test_exported_signature_matches_the_function_and_rejects_what_it_rejects() -> None:
    import inspect

    x = torch.randn(3)
    gm = capture.export(_variadic)(x, x, z=x).graph_module
    assert str(inspect.signature(gm.forward)).startswith("(x, *args, k=")
    assert inspect.signature(gm.forward).parameters["k"].default == 3
    with pytest.raises(TypeError, match="required positional argument"):
        capture.export(_scaled)(x, x).graph_module(x)


def test_export_of_a_module_whose_receiver_is_not_named_self() -> None:
    # (the receiver was recognised by its name: a forward taking `s` exported a graph with one input too many)
    class M(torch.nn.Module):
        def __init__(s) -> None:
            super().__init__()
            s.lin = torch.nn.Linear(4, 4)

        def forward(s, x):
            return s.lin(x).relu()

    m, x = M(), torch.randn(3, 4)
    result = capture.export(m)(x)
    torch.testing.assert_close(result.graph_module(x), m(x))


def test_export_of_a_bound_method_of_a_plain_object() -> None:
    class Scaler:
        def __init__(self) -> None:
            self.w = torch.randn(4)

        def apply(self, x):
            return x * self.w + 1

    scaler, x = Scaler(), torch.randn(3, 4)
    result = capture.export(scaler.apply)(x)
    torch.testing.assert_close(result.graph_module(x), scaler.apply(x))
