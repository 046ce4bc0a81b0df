"""Property tests: the compiled check agrees with a plain reference predicate, and with failure_reason."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dynajit.guards import GuardSet, LocalSource, tensor_match

DTYPES = [torch.float32, torch.float64, torch.int64, torch.bool]


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=3)))
    tensor = torch.zeros(shape, dtype=dtype)
    if len(shape) >= 2 and draw(st.booleans()):
        tensor = tensor.transpose(0, 1)
    if dtype.is_floating_point and draw(st.booleans()):
        tensor.requires_grad_(True)
    return tensor


def same_kind(a, b):
    return (
        type(a) is type(b)
        and a.dtype == b.dtype
        and a.device == b.device
        and a.layout == b.layout
        and a.requires_grad == b.requires_grad
        and a.shape == b.shape
        and a.stride() == b.stride()
    )


@settings(max_examples=80, deadline=None)
@given(tensors(), tensors())
def test_tensor_match_agrees_with_the_reference(example, value):
    compiled = GuardSet([tensor_match(LocalSource("x"), example)]).compile(("x",), {})
    expected = same_kind(example, value)
    assert compiled.check(value) is expected
    assert (compiled.failure_reason(value) is None) is expected


@settings(max_examples=40, deadline=None)
@given(tensors(), st.data())
def test_dynamic_dims_agree_with_the_reference(example, data):
    dynamic = data.draw(st.sets(st.integers(0, max(example.dim() - 1, 0)), max_size=example.dim()))
    value = data.draw(tensors())
    compiled = GuardSet([tensor_match(LocalSource("x"), example, dynamic_dims=dynamic)]).compile(("x",), {})
    static = [d for d in range(example.dim()) if d not in dynamic]
    expected = (
        type(value) is type(example)
        and value.dtype == example.dtype
        and value.requires_grad == example.requires_grad
        and value.dim() == example.dim()
        and all(value.size(d) == example.size(d) for d in static)
        and (
            value.is_contiguous()
            if dynamic and example.is_contiguous()
            else all(value.stride(d) == example.stride(d) for d in static)
        )
    )
    assert compiled.check(value) is expected
    assert (compiled.failure_reason(value) is None) is expected
