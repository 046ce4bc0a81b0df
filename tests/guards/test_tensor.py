"""TENSOR_MATCH, TENSOR_ALIASING and STORAGE_APART: each property shows a hit and a miss with its sentence."""

import pytest
import torch

from dynajit.guards import GuardSet, LocalSource, storage_apart, tensor_aliasing, tensor_match

X, Y, Z = LocalSource("x"), LocalSource("y"), LocalSource("z")


def compiled(*guards, arg_names=("x",)):
    return GuardSet(guards).compile(arg_names, {})


def test_hit_on_a_tensor_of_the_same_kind():
    c = compiled(tensor_match(X, torch.zeros(2, 3)))
    assert c.check(torch.ones(2, 3))
    assert c.failure_reason(torch.ones(2, 3)) is None


@pytest.mark.parametrize(
    ("make_miss", "reason"),
    [
        (lambda: torch.zeros(2, 3, dtype=torch.float64), "L['x'] dtype: expected float32, got float64"),
        (lambda: torch.zeros(2, 4), "L['x'] size()[1]: expected 3, got 4"),
        (lambda: torch.zeros(2, 3, 1), "L['x'] ndim: expected 2, got 3"),
        (lambda: torch.zeros(3, 2).t(), "L['x'] stride()[0]: expected 3, got 1"),
        (lambda: torch.zeros(2, 3, requires_grad=True), "L['x'] requires_grad: expected False, got True"),
        (lambda: torch.nn.Parameter(torch.zeros(2, 3), requires_grad=False), None),
        (lambda: torch.zeros(2, 3).to_sparse(), "L['x'] layout: expected torch.strided, got torch.sparse_coo"),
        (lambda: torch.zeros(2, 3, device="meta"), "L['x'] device: expected cpu, got meta"),
        (lambda: 3.0, "L['x'] type: expected torch.Tensor, got float"),
    ],
)
def test_each_property_misses(make_miss, reason):
    c = compiled(tensor_match(X, torch.zeros(2, 3)))
    miss = make_miss()
    assert c.check(miss) is False
    if reason is None:
        assert c.failure_reason(miss).startswith("L['x'] type: expected torch.Tensor, got torch.nn.parameter")
    else:
        assert c.failure_reason(miss) == reason


def test_inference_tensor_misses_and_matches_its_own_kind():
    normal = compiled(tensor_match(X, torch.zeros(2)))
    with torch.inference_mode():
        inference = torch.zeros(2)
    assert not normal.check(inference)
    assert normal.failure_reason(inference) == "L['x'] inference tensor: expected False, got True"
    assert compiled(tensor_match(X, inference)).check(inference)


def test_math_bits_are_dispatch_keys():
    complex_example = torch.zeros(2, dtype=torch.complex64)
    c = compiled(tensor_match(X, complex_example))
    assert not c.check(complex_example.conj())
    assert c.failure_reason(complex_example.conj()) == "L['x'] conjugate bit: expected False, got True"
    negative_view = torch.zeros(2, dtype=torch.complex64).conj().imag
    real = compiled(tensor_match(X, torch.zeros(2)))
    assert not real.check(negative_view)
    assert real.failure_reason(negative_view) == "L['x'] negative bit: expected False, got True"


def test_unusual_dispatch_keys_compare_the_full_key_set():
    # A tensor whose keys differ from an ordinary one (a functorch batched tensor inside vmap).
    seen = []
    torch.vmap(lambda t: seen.append(t) or t)(torch.zeros(3, 2))
    batched = seen[0]
    guard = tensor_match(X, batched)
    assert any("_dispatch_keys" in check.readable() for check in guard.checks)
    c = compiled(guard)
    assert not c.check(torch.zeros(2))
    assert "dispatch keys" in c.failure_reason(torch.zeros(2))


def test_subclass_is_a_different_class():
    c = compiled(tensor_match(X, torch.nn.Parameter(torch.zeros(2))))
    assert c.check(torch.nn.Parameter(torch.ones(2)))
    assert not c.check(torch.ones(2, requires_grad=True))


def test_dynamic_dims_skip_sizes_and_strides():
    c = compiled(tensor_match(X, torch.zeros(4, 3), dynamic_dims=(0,)))
    assert c.check(torch.zeros(7, 3))
    assert c.check(torch.zeros(1, 3))
    assert not c.check(torch.zeros(7, 2))
    assert c.failure_reason(torch.zeros(7, 2)) == "L['x'] size()[1]: expected 3, got 2"
    assert c.failure_reason(torch.zeros(7, 3, 1)) == "L['x'] ndim: expected 2, got 3"
    every = compiled(tensor_match(X, torch.zeros(4, 3), dynamic_dims=(0, -1)))
    assert "size(" not in every.code and "stride" not in every.code
    assert every.check(torch.zeros(9, 9))
    assert not every.check(torch.zeros(9))


def test_dynamic_dims_of_a_contiguous_example_require_contiguity():
    c = compiled(tensor_match(X, torch.zeros(3, 4), dynamic_dims=(1,)))
    assert c.check(torch.zeros(3, 7))  # stride()[0] follows the dynamic size
    assert not c.check(torch.zeros(7, 3).t())
    assert c.failure_reason(torch.zeros(7, 3).t()) == "L['x'] contiguous: expected True, got False"
    # A non-contiguous example keeps the strides of its static dims.
    transposed = compiled(tensor_match(X, torch.zeros(4, 3).t(), dynamic_dims=(0,)))
    assert transposed.check(torch.zeros(4, 3).t())
    assert transposed.failure_reason(torch.zeros(3, 4)) == "L['x'] stride()[1]: expected 3, got 1"


def test_dynamic_dim_out_of_range_is_a_clear_error():
    with pytest.raises(ValueError, match="out of range for L\\['x'\\], which has 2 dimensions"):
        tensor_match(X, torch.zeros(2, 2), dynamic_dims=(2,))


def test_fake_tensor_example_is_rejected():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.zeros(2))
    with pytest.raises(TypeError, match="real argument value"):
        tensor_match(X, fake)


def test_aliasing_same_vs_different_tensors():
    t, u = torch.zeros(2), torch.zeros(2)
    distinct = compiled(tensor_aliasing([], [X, Y]), arg_names=("x", "y"))
    assert distinct.check(t, u)
    assert not distinct.check(t, t)
    assert distinct.failure_reason(t, t) == "L['x'] and L['y'] must be different tensors, got the same one"
    same = compiled(tensor_aliasing([X, Y], []), arg_names=("x", "y"))
    assert same.check(t, t)
    assert same.failure_reason(t, u) == "L['y'] must be the same object as L['x'], got a different one"


def test_aliasing_of_other_objects_names_them_objects():
    shared = []
    distinct = compiled(tensor_aliasing([], [X, Y]), arg_names=("x", "y"))
    assert distinct.check(shared, [])
    assert not distinct.check(shared, shared)
    assert distinct.failure_reason(shared, shared) == "L['x'] and L['y'] must be different objects, got the same one"


def test_aliasing_many_distinct_inputs():
    names = tuple(f"t{i}" for i in range(5))
    sources = [LocalSource(name) for name in names]
    c = compiled(tensor_aliasing([], sources), arg_names=names)
    tensors = [torch.zeros(1) for _ in names]
    assert c.check(*tensors)
    tensors[4] = tensors[1]
    assert not c.check(*tensors)
    assert c.failure_reason(*tensors) == "L['t1'] and L['t4'] must be different tensors, got the same one"


def test_aliasing_needs_two_sources():
    with pytest.raises(ValueError, match="two or more"):
        tensor_aliasing([X], [Z])


def test_a_written_input_keeps_its_memory_apart_from_the_others():
    c = compiled(storage_apart([X], [Y, Z]), arg_names=("x", "y", "z"))
    base, other = torch.zeros(6), torch.zeros(6)
    assert c.check(base, other, other[1:])  # the unwritten inputs may share memory with each other
    assert not c.check(base, other, base[3:])
    assert c.failure_reason(base, other, base[3:]) == "L['x'] shares memory with L['z'], and the graph writes into it"
    assert not c.check(base[:2], base[2:], other)


def test_storage_apart_needs_a_written_source_and_another():
    with pytest.raises(ValueError, match="written source and another"):
        storage_apart([X], [])


def test_non_cpu_device_compares_the_device():
    c = compiled(tensor_match(X, torch.zeros(2, device="meta")))
    assert c.check(torch.ones(2, device="meta"))
    assert c.failure_reason(torch.ones(2)) == "L['x'] device: expected meta, got cpu"
