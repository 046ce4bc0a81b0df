"""Functions with assert statements, kept out of test modules so pytest does not rewrite their asserts."""


def assert_const(x):
    assert x.dim() == 1, "expected a vector"
    return x + 1


def assert_tensor(x):
    assert (x > -100).all(), "out of range"
    return x + 1
