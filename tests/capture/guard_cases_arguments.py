"""Guard-soundness cases (registered in guard_cases.CASES): the arguments of the call.

A tensor's dtype, shape, rank, layout, grad flags, aliasing or Python attributes; a number, tuple, list or
optional argument. Most also run with dynamic sizes (test_sym_guard_soundness's DYNAMIC_CASES).
"""

from __future__ import annotations

import torch
from guard_cases import case

# ----------------------------------------------------------------- tensors


@case
def tensor_python_attr_added():
    y = torch.ones(2)

    def f(x):
        return x + 1 if hasattr(x, "test") else x - 1

    return f, lambda: (y,), lambda: setattr(y, "test", None)


@case
def tensor_python_attr_changed():
    y = torch.ones(2)
    y.scale = 2

    def f(x):
        return x * x.scale

    return f, lambda: (y,), lambda: setattr(y, "scale", 5)


@case
def tensor_dtype_changed():
    state = {"dtype": torch.float32}

    def f(x):
        return x * 2 if x.dtype == torch.float32 else x + 100

    return f, lambda: (torch.ones(2, dtype=state["dtype"]),), lambda: state.update(dtype=torch.float64)


@case
def tensor_shape_changed():
    state = {"n": 2}

    def f(x):
        return x.sum() * x.shape[0]

    return f, lambda: (torch.ones(state["n"]),), lambda: state.update(n=5)


@case
def tensor_rank_changed():
    state = {"shape": (4,)}

    def f(x):
        return x + x.dim()

    return f, lambda: (torch.ones(state["shape"]),), lambda: state.update(shape=(2, 2))


@case
def tensor_requires_grad_changed():
    state = {"grad": False}

    def f(x):
        return x * 2 if x.requires_grad else x + 100

    return (
        f,
        lambda: (torch.ones(2, requires_grad=state["grad"]),),
        lambda: state.update(grad=True),
    )


@case
def tensor_contiguity_changed():
    state = {"t": False}

    def f(x):
        return x + 1 if x.is_contiguous() else x - 1

    def make():
        base = torch.ones(3, 4)
        return (base.t() if state["t"] else base,)

    return f, make, lambda: state.update(t=True)


@case
def tensor_argument_aliasing_changed():
    state = {"same": False}

    def f(x, y):
        x.add_(1)
        return y * 1

    def make():
        a = torch.ones(2)
        return (a, a) if state["same"] else (a, a.clone())

    return f, make, lambda: state.update(same=True)


@case
def tensor_leaf_status_changed():
    state = {"leaf": True}

    def f(x):
        return x * 2 if x.is_leaf else x + 100

    def make():
        base = torch.ones(2, requires_grad=True)
        return (base if state["leaf"] else base * 1,)

    return f, make, lambda: state.update(leaf=False)


@case
def tensor_storage_offset_changed():
    state = {"offset": 0}

    def f(x):
        return x * x.storage_offset()

    return f, lambda: (torch.ones(state["offset"] + 3)[state["offset"] :],), lambda: state.update(offset=2)


def _view_status_case(first_a_view: bool):
    state = {"view": first_a_view}

    def f(x):
        return x * 2 if x._is_view() else x + 100

    def make():
        base = torch.ones(3, 2)
        return (base[1] if state["view"] else base[1].clone(),)

    return f, make, lambda: state.update(view=not first_a_view)


@case
def tensor_view_status_changed():
    return _view_status_case(first_a_view=False)


@case
def tensor_view_status_changed_to_plain():
    return _view_status_case(first_a_view=True)


@case
def finfo_of_a_changed_dtype():
    state = {"dtype": torch.float32}

    def f(x):
        return x.masked_fill(x > 0, torch.finfo(x.dtype).min).double()

    return f, lambda: (torch.ones(2, dtype=state["dtype"]),), lambda: state.update(dtype=torch.float16)


# ----------------------------------------------------------------- numbers, tuples, lists and optional arguments


@case
def tuple_argument_length_changed():
    state = {"t": (1, 2)}

    def f(x, t):
        return x + len(t)

    return f, lambda: (torch.ones(2), state["t"]), lambda: state.update(t=(1, 2, 3))


@case
def size_argument_swapped_for_tuple():
    state = {"s": torch.Size([2])}

    def f(x, s):
        return x + 1 if isinstance(s, torch.Size) else x - 1

    return f, lambda: (torch.ones(2), state["s"]), lambda: state.update(s=(2,))


@case
def float_argument_changed():
    state = {"f": 0.5}

    def f(x, k):
        return x * k

    return f, lambda: (torch.ones(2), state["f"]), lambda: state.update(f=1.5)


@case
def int_argument_branch():
    state = {"n": 2}

    def f(x, n):
        return x + 1 if n > 3 else x - 1

    return f, lambda: (torch.ones(2), state["n"]), lambda: state.update(n=5)


@case
def star_args_length_changed():
    state = {"extra": (1,)}

    def f(x, *rest):
        return x + len(rest)

    return f, lambda: (torch.ones(2), *state["extra"]), lambda: state.update(extra=(1, 2))


@case
def optional_tensor_argument_given():
    state = {"b": None}

    def f(x, b):
        return x * 2 if b is None else x + b + 10

    return f, lambda: (torch.ones(2), state["b"]), lambda: state.update(b=torch.ones(2))


@case
def tensor_list_argument_grows():
    state = {"n": 2}

    def f(xs):
        total = xs[0]
        for t in xs[1:]:
            total = total + t
        return total

    return f, lambda: ([torch.ones(2)] * state["n"],), lambda: state.update(n=3)


@case
def tuple_argument_item_becomes_tensor():
    state = {"pair": (torch.ones(2), None)}

    def f(pair):
        a, b = pair
        return a * 2 if b is None else a + b + 10

    return f, lambda: (state["pair"],), lambda: state.update(pair=(torch.ones(2), torch.ones(2)))
