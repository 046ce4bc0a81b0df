"""super(), imports, user-defined __getitem__/__contains__, hasattr on objects, and breaks that cannot resume:
each differential against eager."""

from __future__ import annotations

import collections.abc
import contextvars
import inspect

import torch

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


class Base(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()

    @property
    def scale(self):
        return 2.0


class Child(Base):
    def forward(self, x):
        return super().forward(x) * super().scale + super(Child, self).forward(x)  # noqa: UP008  (the two-argument form is traced too)


class GrandChild(Child):
    def forward(self, x):
        return super().forward(x) - 1


def test_super_calls_are_inlined(check, t):
    for module in (Child(), GrandChild()):
        check(module.forward, t(3, 4), graphs=1)


class Registry(dict):
    def get(self, key):
        return super().get(key) or 1.0


REGISTRY = Registry(a=3.0)


def registry_scale(x):
    return x * REGISTRY.get("a") + REGISTRY.get("missing")


def test_super_reads_of_a_dict_subclass_are_guarded_by_its_keys(t):
    counter = CompileCounter()
    compiled = capture.optimize(counter)(registry_scale)
    x = t(3)
    torch.testing.assert_close(compiled(x), registry_scale(x))
    REGISTRY["missing"] = 5.0
    try:
        torch.testing.assert_close(compiled(x), registry_scale(x))
    finally:
        del REGISTRY["missing"]
    assert counter.frame_count == 2


def imports_inside(x):
    import math

    from torch.nn import functional as F

    return F.relu(x) * math.pi


def test_imports_of_loaded_modules_are_traced(check, t):
    check(imports_inside, t(4), graphs=1)


class Table(collections.abc.Mapping):
    def __init__(self) -> None:
        self.data = {"relu": torch.relu, "tanh": torch.tanh}

    def __getitem__(self, key):
        return self.data[key]

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)

    def __contains__(self, key):
        return key in self.data


TABLE = Table()


def table_lookup(x):
    fn = TABLE["tanh"] if "tanh" in TABLE else TABLE["relu"]
    return fn(x)


def test_user_defined_getitem_and_contains_are_inlined(check, t):
    check(table_lookup, t(4), graphs=1)


class Holder:
    pass


HOLDER = Holder()


def optional_attribute(x):
    if hasattr(HOLDER, "bias"):
        return x + HOLDER.bias
    return x * 2


def test_a_missing_attribute_is_guarded(t):
    counter = CompileCounter()
    compiled = capture.optimize(counter)(optional_attribute)
    x = t(3)
    torch.testing.assert_close(compiled(x), optional_attribute(x))
    HOLDER.bias = 10.0
    try:
        torch.testing.assert_close(compiled(x), optional_attribute(x))
    finally:
        del HOLDER.bias
    assert counter.frame_count == 2


def inner(x):
    return (x.sin() + 1).relu()


def wrapper_with_cleanup(x):
    with torch.autocast("cpu", enabled=False):
        print("wrapper")  # a graph break inside an autocast block: this frame cannot resume after it
        return inner(x) * 2


def test_a_frame_that_cannot_resume_still_compiles_what_it_calls(t, capsys):
    counter = CompileCounter()
    compiled = capture.optimize(counter)(wrapper_with_cleanup)
    x = t(4)
    with capture.observe() as seen:
        torch.testing.assert_close(compiled(x), wrapper_with_cleanup(x))
    assert counter.frame_count == 1  # inner's graph
    frames = {frame.name: frame for frame in seen.frames}
    assert "cannot be resumed" in frames["wrapper_with_cleanup"].graph_breaks[0].reason
    assert len(frames["inner"].graphs) == 1


def apply_in_chunks(fn, x):
    # as transformers' apply_chunking_to_forward does: read the callee's signature
    count = len(inspect.signature(fn).parameters)
    return fn(x) if count == 1 else fn(x, x)


class Doubler(torch.nn.Module):
    def forward(self, x):
        return x * 2


DOUBLER = Doubler()


def difference(a, b):
    return a - b


def signature_of_a_method(x):
    return apply_in_chunks(DOUBLER.forward, x) + apply_in_chunks(difference, x) + apply_in_chunks(DOUBLER, x)


def test_inspect_signature_of_a_known_callable_is_read_while_tracing(check, t):
    check(signature_of_a_method, t(4), graphs=1)


COUNTER = contextvars.ContextVar("counter", default=0)


def bound_c_method(x, setter):
    token = setter(1)
    COUNTER.reset(token)
    return x + 1


def test_a_bound_method_of_a_c_object_does_not_recompile_on_every_call(t):
    counter = CompileCounter()
    compiled = capture.optimize(counter)(bound_c_method)
    x = t(3)
    for _ in range(4):
        torch.testing.assert_close(compiled(x, COUNTER.set), bound_c_method(x, COUNTER.set))  # a new bound method
    assert counter.frame_count == 1


class WeightedLoss:
    def __init__(self, weight):
        self.weight = weight

    def __call__(self, a, b):
        return ((a - b) ** 2).mean() * self.weight


class ScaledLoss(WeightedLoss):  # __call__ inherited
    pass


class NativeCall:
    __call__ = torch.sin  # a C function: not traced


CRITERION = ScaledLoss(2.0)
NATIVE = NativeCall()


def uses_callable_object(x, y):
    return CRITERION(x.sin(), y) + 1


def uses_native_callable(x):
    return NATIVE(x) + 1


def test_calling_an_object_inlines_its_class_call_and_guards_what_it_reads(check, t):
    x, y = t(5), t(5)
    check(uses_callable_object, x, y, graphs=1)
    counter = CompileCounter()
    compiled = capture.optimize(counter)(uses_callable_object)
    torch.testing.assert_close(compiled(x, y), uses_callable_object(x, y))
    CRITERION.weight = 5.0
    try:
        torch.testing.assert_close(compiled(x, y), uses_callable_object(x, y))
    finally:
        CRITERION.weight = 2.0
    assert counter.frame_count == 2


def test_calling_an_object_whose_call_is_in_c_is_a_break_naming_it(check, t):
    check(uses_native_callable, t(4), graphs=1)
    from dynajit.capture._convert import convert_frame
    from dynajit.capture._frame import FrameContext

    (brk,) = convert_frame(uses_native_callable, (t(4),), FrameContext(backend=CompileCounter())).graph_breaks
    assert "calling a NativeCall object (its __call__ is implemented in C)" in brk.reason
