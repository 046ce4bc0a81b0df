"""What a resume function must keep of the frame it continues: the container a comprehension is building,
and the object zero-argument ``super()`` binds to.

Python 3.12 inlines comprehensions into their function, so a break inside one leaves the list it builds on
the stack, and the resume function takes it as an argument: its appends must reach that list. Python 3.11's
``super()`` takes the frame's first local as its object, which in a resume function is its first argument.
"""

import pytest
import torch

import dynajit.capture as capture


def broken(value):
    capture.graph_break()
    return value


def list_built_across_a_break(x):
    return [broken(x * i) for i in range(3)]


def dict_built_across_a_break(x):
    return {i: broken(x + i) for i in range(3)}


def filtered_across_a_break(x):
    return [x * i for i in range(4) if broken(i % 2)]


def nested_across_a_break(x):
    return [[broken(x * i * j) for j in range(2)] for i in range(2)]


def unpacked_across_a_break(x):
    return [*x.unbind(0), *broken([x.sum()])], {**{"a": x}, **broken({"b": x * 2})}


@pytest.mark.parametrize(
    "fn",
    [
        list_built_across_a_break,
        dict_built_across_a_break,
        filtered_across_a_break,
        nested_across_a_break,
        unpacked_across_a_break,
    ],
)
def test_a_container_being_built_keeps_what_the_resume_function_adds(check, t, fn):
    # The resume function's appends changed only its tracker of the list: the result was [] on 3.12.
    check(fn, t(3), calls=2)


def set_built_across_a_break(x):
    return sorted({broken(i % 2) for i in range(4)}), x


def test_a_set_being_built_across_a_break_is_built_in_python(check, t):
    check(set_built_across_a_break, t(3), calls=2)


class Base:
    def scale(self, x):
        return x * 2


class Child(Base):
    def scale(self, x):
        y = broken(super().scale(x))
        return super().scale(y) + 1


class ChildBreakingInALoop(Base):
    def scale(self, x):
        for i in range(2):
            x = broken(x + i)
        return super().scale(x)


@pytest.mark.parametrize("cls", [Child, ChildBreakingInALoop])
def test_zero_argument_super_after_a_break_binds_the_method_s_object(check, t, cls):
    # 3.11: the resume function's first local was a stack value, not the method's object (AttributeError).
    obj = cls()
    check(obj.scale, t(3), calls=2)
    check(lambda x: obj.scale(x) * 3, t(3), calls=2)


def tensor_methods_across_a_break(x, weight):
    y = x * 2
    return y.reshape(broken((-1,))) + 1, y.view(broken((2, -1))), weight.mul(broken(3)), x.add_(broken(1))


def test_a_tensor_s_method_on_the_stack_across_a_break_is_traced(check, t):
    # `y.reshape` crossed the break as a bound method holding the real tensor: calling it in the resume function
    # handed that tensor to fake mode, so each resume function broke again and ran in Python. Now it is the
    # method of the tensor reached as its `__self__`, traced as `y.reshape` is, and guarded by its name.
    weight = torch.nn.Parameter(torch.randn(3))
    counter = check(tensor_methods_across_a_break, t(4, 3), weight, calls=3)
    assert counter.frame_count == 5, "the first graph and one per resume function, each compiled once"
    assert counter.op_count == 6
