"""Python operators the real models use on tensors mixed with numbers: in-place operators on a number."""

import operator

import torch

import dynajit.capture as capture


def int_augmented_add(t):
    acc = 0
    acc += (t > 0).long() * 4  # T5's relative position buckets start from an int
    return acc + t


def float_augmented_ops(t):
    scale = 1.0
    scale *= t
    shift = 2
    shift -= t
    bits = 6
    bits &= (t > 0).long()
    bits |= (t < 0).long()
    return scale, shift, bits


def tensor_augmented_add_keeps_aliasing(t):
    alias = t
    t += 1  # a tensor's own __iadd__: the alias sees the update
    return alias, t


def test_number_left_of_an_in_place_operator_rebinds(check, t):
    counter = check(int_augmented_add, t(4), graphs=1, fullgraph=True)
    code = counter.graphs[0].code
    assert "+=" not in code, code


def test_float_and_int_in_place_operators_on_tensors(check, t):
    check(float_augmented_ops, t(4), graphs=1, fullgraph=True)


def test_tensor_in_place_operator_still_mutates(check, t):
    check(tensor_augmented_add_keeps_aliasing, t(4), graphs=1, fullgraph=True)


def size_augmented_ops(t):
    n = t.shape[0]
    n += 1
    n *= 2
    return t * n


def test_symbolic_size_left_of_an_in_place_operator(check, t):
    counter = check(size_augmented_ops, t(4), graphs=1, fullgraph=True)
    counter.clear()
    compiled = capture.optimize(counter, dynamic=True)(size_augmented_ops)
    for n in (3, 5):
        x = t(n)
        torch.testing.assert_close(compiled(x), size_augmented_ops(x))
    assert counter.frame_count == 1


def operator_module_functions(t, u):
    alias = t
    operator.iadd(t, 1)  # what ``t += 1`` runs: the alias sees the update
    scaled = operator.itruediv(u * 1, 2)
    n = operator.imul(t.shape[0], 2)
    return alias, operator.matmul(t, u.t()), operator.pow(t, 2), operator.invert(t > 0), scaled * n, operator.lt(t, u)


def test_operator_module_functions_trace_as_their_operators(check, t):
    check(operator_module_functions, t(4).view(2, 2), t(4).view(2, 2), graphs=1, fullgraph=True)
