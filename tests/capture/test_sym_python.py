"""Python constants, containers, builtins, f-strings and control flow on constants, decided at trace time."""

import math

import pytest
import torch


def p_const_arith(x, n):
    k = (n * 3 + 1) // 2 - n % 2
    return x * k + 2.5**2


def p_tuple_unpack(x, n):
    a, (b, c), *rest = (1, (2, 3), 4, 5)
    return x * a + b * c + sum(rest)


def p_list_ops(x, n):
    items = [x, x + 1]
    items.append(x * 2)
    items.extend([x - 1])
    items.insert(0, x / 2)
    last = items.pop()
    items.reverse()
    return items[0] + last, len(items)


def p_list_comprehension(x, n):
    return [x * i for i in range(n)]


def p_dict_ops(x, n):
    d = {"a": x, "b": x + 1}
    d["c"] = x * 2
    total = 0
    for _key, v in d.items():
        total = total + v
    return total, list(d.keys()), d.get("z", 7), "a" in d


def p_dict_comprehension(x, n):
    return {f"k{i}": x + i for i in range(n)}


def p_set_ops(x, n):
    s = {1, 2, 3}
    s2 = s | {4}
    return x * len(s2), 2 in s


def p_slices(x, n):
    seq = (1, 2, 3, 4, 5)
    return x * sum(seq[1:4]) + seq[-1] + seq[::2][1]


def p_range_loop(x, n):
    for i in range(n):
        x = x + i
    return x


def p_while_const(x, n):
    i = 0
    while i < n:
        x = x * 1.5
        i += 1
    return x


def p_if_const(x, n):
    if n > 2:
        return x + 1
    elif n == 2:
        return x + 2
    return x + 3


def p_ternary_and_or(x, n):
    k = n if n > 1 else 5
    flag = n > 0 and n < 10
    other = (n < 0) or (n > 1)
    return x * k, flag, other


def p_enumerate_zip(x, n):
    out = []
    for i, (a, b) in enumerate(zip([x, x * 2], [1, 2])):
        out.append(a * b + i)
    return out


def p_builtins_minmax(x, n):
    return x * max(n, 3) + min([4, n, 9]) + abs(-n)


def p_all_any(x, n):
    return all([n > 0, n < 100]), any([n < 0, False]), x + 1


def p_isinstance(x, n):
    if isinstance(x, torch.Tensor) and isinstance(n, int) and not isinstance(n, float):
        return x + n
    return x


def p_getattr_hasattr(x, n):
    return getattr(x, "shape")[0] * x, hasattr(x, "relu"), hasattr(x, "nope")


def p_fstring(x, n):
    name = f"layer_{n}_{n * 2:03d}_{'ok'!r}"
    return x + len(name), name


def p_string_methods(x, n):
    return x + 1, "a,b,c".split(","), "Hello".upper(), "-".join(["x", "y"])


def p_math(x, n):
    return x * math.sqrt(16) + math.pi + math.floor(2.7)


def p_none_checks(x, n):
    opt = None
    if opt is None:
        opt = x
    if opt is not None:
        return opt + 1
    return x


def p_chained_compare(x, n):
    return x + 1 if 0 < n < 10 else -x


def p_nested_containers(x, n):
    cfg = {"layers": [1, 2, 3], "scale": (0.5, 2.0)}
    return x * cfg["scale"][1] + len(cfg["layers"])


def p_tuple_compare(x, n):
    return x + 1 if (1, 2) < (1, 3) else -x


def p_reversed_sorted(x, n):
    return x * sorted([3, 1, 2])[0] + list(reversed([1, 2, 3]))[0]


def p_bool_int_float(x, n):
    return x * int(2.7) + float(n) + bool(n)


def p_unpack_ex(x, n):
    first, *middle, last = [1, 2, 3, 4]
    return x + first + last + len(middle)


def p_list_of_tensors_input(xs, n):
    return torch.stack(xs).sum(0) * n


def p_dict_input(d, n):
    return d["a"] * d["b"] + n


def p_kwargs_star(x, n):
    def inner(*args, **kwargs):
        return sum(args) + kwargs["k"]

    return x + inner(1, 2, k=n)


def p_divmod_round(x, n):
    q, r = divmod(n + 7, 3)
    return x * q + round(2.567, 1) + r


def p_string_compare(x, n):
    mode = "sum"
    if mode == "sum":
        return x.sum()
    return x.mean()


def p_loop_break_continue(x, n):
    for i in range(10):
        if i == 1:
            continue
        if i > n:
            break
        x = x + i
    return x


def p_tuple_of_tensors_arg(pair, n):
    a, b = pair
    return a * b


CASES = [
    p_const_arith, p_tuple_unpack, p_list_ops, p_list_comprehension, p_dict_ops, p_dict_comprehension, p_set_ops,
    p_slices, p_range_loop, p_while_const, p_if_const, p_ternary_and_or, p_enumerate_zip, p_builtins_minmax,
    p_all_any, p_isinstance, p_getattr_hasattr, p_fstring, p_string_methods, p_math, p_none_checks,
    p_chained_compare, p_nested_containers, p_tuple_compare, p_reversed_sorted, p_bool_int_float, p_unpack_ex,
    p_kwargs_star, p_divmod_round, p_string_compare, p_loop_break_continue,
]  # fmt: skip


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n", [3])
def test_python_constructs_in_one_graph(check, t, fn, n):
    check(fn, t(4), n, graphs=1)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_constant_branches_per_value(check, t, n):
    check(p_if_const, t(4), n, graphs=1)


def test_list_of_tensors_input(check, t):
    check(p_list_of_tensors_input, [t(3), t(3), t(3)], 2, graphs=1)


def test_dict_input(check, t):
    check(p_dict_input, {"a": t(3), "b": t(3)}, 2, graphs=1)


def test_tuple_input(check, t):
    check(p_tuple_of_tensors_arg, (t(3), t(3)), 0, graphs=1)


def test_guarded_constant_change_recompiles(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    counter = CompileCounter()
    compiled = capture.optimize(counter)(p_range_loop)
    x = t(4)
    for n in (2, 3, 2, 3):
        torch.testing.assert_close(compiled(x, n), p_range_loop(x, n))
    assert counter.frame_count == 2


def test_dtype_change_recompiles(t):
    import dynajit.capture as capture
    from dynajit.capture.testing import CompileCounter

    counter = CompileCounter()
    compiled = capture.optimize(counter)(p_const_arith)
    for dtype in (torch.float32, torch.float64, torch.float32):
        x = t(4, dtype=dtype)
        torch.testing.assert_close(compiled(x, 3), p_const_arith(x, 3))
    assert counter.frame_count == 2


def p_append_while_iterating(x, n):
    items = [1, 2]
    out = x
    for v in items:
        if v < 4:
            items.append(v + 2)
        out = out + v
    return out, items


def test_appending_while_iterating(check, t):
    check(p_append_while_iterating, t(3), 0, graphs=1)


SEEN = []


def p_break_while_iterating_a_list(x, n):
    items = [1, 2]
    out = x
    for v in items:
        SEEN.append(id(v) > 0)  # a graph break inside the loop
        if v < 4:
            items.append(v + 2)
        out = out + v
    return out, items


def test_break_while_iterating_a_growing_list(check, t):
    check(p_break_while_iterating_a_list, t(3), 0)
