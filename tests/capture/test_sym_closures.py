"""Graph breaks in closures and in functions whose variables are captured by inner functions."""

import torch

SINK = []


def opaque(value):
    SINK.append(id(value) > 0)  # id() of a tensor is not traced: a graph break
    return value


def make_scaled(scale):
    def scaled(x):
        y = x * scale
        opaque(y)
        return y + scale

    return scaled


def captured_by_inner(x):
    offset = x.sum()

    def shift(v):
        return v + offset

    y = shift(x)
    opaque(y)
    return shift(y) * 2


def closure_branch(factor):
    def branch(x):
        if x.sum() > 0:
            return x * factor
        return x - factor

    return branch


def test_break_in_closure(check, t):
    check(make_scaled(3.0), t(4), graphs=2)


def test_two_closures_over_different_cells_do_not_mix(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    counter = CompileCounter()
    x = t(4)
    for scale in (2.0, 5.0):
        fn = make_scaled(scale)
        torch.testing.assert_close(capture.optimize(counter)(fn)(x), fn(x))


def test_break_with_cell_variables(check, t):
    check(captured_by_inner, t(4), graphs=2)


def test_tensor_branch_in_closure(check, t):
    gen = torch.Generator().manual_seed(5)
    check(closure_branch(2.0), calls=6, make_args=lambda: (torch.randn(4, generator=gen),))
