"""A wider differential corpus: torch functions, tensor methods, Python idioms and graph breaks."""

import math

import pytest
import torch
import torch.nn.functional as F

import dynajit.capture as capture

UNARY_TORCH = [
    torch.abs, torch.exp, torch.log1p, torch.sigmoid, torch.tanh, torch.relu, torch.sqrt, torch.square,
    torch.floor, torch.ceil, torch.round, torch.sign, torch.neg, torch.reciprocal, torch.erf, torch.cumsum,
    F.silu, F.softplus, F.elu, F.leaky_relu, F.normalize, torch.flatten, torch.t, torch.trace,
]  # fmt: skip


def _call_unary(fn, x):
    if fn is torch.cumsum:
        return fn(x, dim=0)
    if fn in (torch.sqrt, torch.log1p, torch.reciprocal):
        return fn(x.abs() + 1)
    return fn(x)


@pytest.mark.parametrize("fn", UNARY_TORCH, ids=lambda f: f.__name__)
def test_torch_function(check, t, fn):
    def run(x):
        return _call_unary(fn, x) * 2

    check(run, t(3, 3), graphs=1)


METHODS = [
    ("sum", (), {"dim": 0}), ("mean", (), {}), ("max", (), {}), ("argmax", (1,), {}), ("softmax", (-1,), {}),
    ("permute", (1, 0), {}), ("transpose", (0, 1), {}), ("view", (-1,), {}), ("reshape", (9,), {}),
    ("clamp", (), {"min": 0.0}), ("masked_fill", (None, 0.0), {}), ("repeat", (2, 1), {}), ("flip", (0,), {}),
    ("norm", (), {}), ("type_as", (None,), {}), ("new_zeros", ((2, 2),), {}), ("chunk", (3,), {}),
    ("squeeze", (), {}), ("float", (), {}), ("detach", (), {}),
]  # fmt: skip


@pytest.mark.parametrize("name,args,kwargs", METHODS, ids=[m[0] for m in METHODS])
def test_tensor_method(check, t, name, args, kwargs):
    def run(x):
        real_args = [x > 0 if a is None and name == "masked_fill" else x if a is None else a for a in args]
        return getattr(x, name)(*real_args, **kwargs)

    check(run, t(3, 3), graphs=1)


def py_nested_loops(x):
    out = x
    for i in range(2):
        for j in range(3):
            if (i + j) % 2 == 0:
                out = out + i * j
    return out


def py_while_else(x):
    i = 0
    while i < 3:
        i += 1
    else:
        x = x + i
    return x


def py_list_slicing_assign(x):
    items = [x, x * 2, x * 3, x * 4]
    items[1:3] = [x - 1]
    del items[0]
    return sum(items)


def py_dict_methods(x):
    d = dict(a=1, b=2)
    d.update({"c": 3})
    d.setdefault("d", 4)
    popped = d.pop("a")
    return x * (popped + sum(d.values())) + len(d)


def py_sorted_keys(x):
    d = {"b": x, "a": x * 2}
    return [d[k] for k in sorted(d)]


def py_string_format(x):
    tag = "mode=%s" % "fast"  # noqa: UP031
    return x + len(tag) + len(f"{3.14159:.2f}") + len(f"{1}-{2}")


def py_math_consts(x):
    return x * math.e + math.inf * 0 if False else x * math.tau


def py_tuple_methods(x):
    tup = (3, 1, 3)
    return x * tup.count(3) + tup.index(1)


def py_conditional_expression_chain(x):
    n = x.shape[0]
    size = "small" if n < 3 else "medium" if n < 10 else "large"
    return x + len(size)


def py_boolean_ops_on_constants(x):
    a, b = True, False
    return x * ((a and not b) or b) + (a ^ b)


def py_global_constant_config(x):
    return x * CONFIG["scale"] + CONFIG["bias"]


CONFIG = {"scale": 2.0, "bias": 0.5}


def py_slice_object(x):
    s = slice(1, None)
    return x[s] * 2


def py_ellipsis_index(x):
    return x[..., 0] + x[None][0, :, 1]


def py_tensor_index_with_tensor(x):
    idx = torch.tensor([0, 2])
    return x[idx] + 1


def py_list_comprehension_with_condition(x):
    return [x * i for i in range(5) if i % 2]


def py_generator_expression_sum(x):
    return sum(x * i for i in range(3))


def py_zip_dict(x):
    keys = ["a", "b"]
    vals = [x, x + 1]
    d = dict(zip(keys, vals))
    return d["b"] - d["a"]


def py_enumerate_start(x):
    total = x
    for i, v in enumerate([1, 2], start=10):
        total = total + i * v
    return total


def py_unpack_in_call(x):
    sizes = (3, 3)
    return x.reshape(*sizes) + torch.zeros(*sizes)


def py_kwarg_defaults_nested(x):
    def inner(v, *, scale=2, **rest):
        return v * scale + rest.get("shift", 0)

    return inner(x) + inner(x, scale=3, shift=1)


def py_isinstance_tuple(x):
    val = 3
    return x + 1 if isinstance(val, (float, int)) else x


def py_min_max_tensors(x):
    return max(x, x * 2) + min(x, -x)


def py_abs_of_tensor(x):
    return abs(x) + abs(-3)


def py_torch_size_ops(x):
    s = x.size()
    return x.new_ones(s) * s[0] + s.numel()


def py_dtype_compare(x):
    return x.to(torch.int64) if x.dtype in (torch.float32, torch.float16) else x


PYTHON_CASES = [
    py_nested_loops, py_while_else, py_list_slicing_assign, py_dict_methods, py_sorted_keys, py_string_format,
    py_math_consts, py_tuple_methods, py_conditional_expression_chain, py_boolean_ops_on_constants,
    py_global_constant_config, py_slice_object, py_ellipsis_index, py_tensor_index_with_tensor,
    py_list_comprehension_with_condition, py_generator_expression_sum, py_zip_dict, py_enumerate_start,
    py_unpack_in_call, py_kwarg_defaults_nested, py_isinstance_tuple, py_min_max_tensors, py_abs_of_tensor,
    py_torch_size_ops, py_dtype_compare,
]  # fmt: skip

# Generator expressions are generators: their frames run in Python (a graph break at the call).
_EXPECTED_GRAPHS = {
    "py_generator_expression_sum": None,
    "py_tensor_index_with_tensor": None,
    "py_min_max_tensors": None,
}


@pytest.mark.parametrize("fn", PYTHON_CASES, ids=lambda f: f.__name__)
def test_python_idioms(check, t, fn):
    check(fn, t(3, 3), graphs=_EXPECTED_GRAPHS.get(fn.__name__, 1))


SINK = []


def opaque(v):
    capture.graph_break()
    SINK.append(v is not None)
    return v


def br_two_breaks(x):
    y = x + 1
    opaque(y)
    z = y * 2
    opaque(z)
    return z - 1


def br_break_then_tensor_branch(x):
    y = opaque(x * 2)
    if y.mean() > 0:
        return y + 1
    return y - 1


def br_break_in_loop(x):
    for i in range(3):
        x = x + i
        opaque(x)
    return x


def br_break_returns_value_used(x):
    v = opaque(x.sum())
    return x * v


def br_method_on_object_breaks(x):
    holder = []
    holder.append(x + 1)
    return holder[0].numpy().sum() + 0 if False else opaque(holder)[0] * 2


def br_unsupported_attribute(x):
    y = x * 2
    version = y._version
    return y + version


# A break inside a loop: the first piece is compiled; the rest of the loop runs in Python, because the
# resume function would get the loop's iterator, which guards cannot check.
BREAK_CASES = [
    (br_two_breaks, 3), (br_break_then_tensor_branch, 3), (br_break_in_loop, 3), (br_break_returns_value_used, 2),
    (br_method_on_object_breaks, 2), (br_unsupported_attribute, 2),
]  # fmt: skip


@pytest.mark.parametrize("fn,graphs", BREAK_CASES, ids=lambda c: getattr(c, "__name__", str(c)))
def test_graph_break_corpus(check, t, fn, graphs):
    check(fn, t(3), graphs=graphs)
