"""Dynamic graphs compiled by inductor-lite (and `aot_eager` where the layouts matter), called at sizes 0 and 1 and with negative ints after a dynamic recompile.

A dynamic graph must accept every input its guards accept: sizes 0 and 1 are
specialised (their own graphs), so the generated kernels never see a size the
trace did not reason about. Each case compares compiled with eager, call by
call, with no fallback to eager allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.utils._pytree as pytree

from dynajit import capture, compiler


def _compare(fn: Callable[..., Any], calls: Sequence[Callable[[], tuple[Any, ...]]], **options: Any) -> None:
    compiler.reset()
    compiled = compiler.compile(fn, backend="inductor", **options)
    for i, make in enumerate(calls):
        eager_args, compiled_args = make(), make()
        expected, actual = fn(*eager_args), compiled(*compiled_args)
        for name, got, want in [("result", actual, expected), *zip(["argument"] * 9, compiled_args, eager_args)]:
            if isinstance(want, torch.Tensor):
                assert got.shape == want.shape and got.dtype == want.dtype, f"call {i} {name}"
                torch.testing.assert_close(got, want, equal_nan=True, msg=lambda m: f"call {i} {name}: {m}")
            else:
                assert got == want, f"call {i} {name}"


def _squeeze(x: torch.Tensor) -> torch.Tensor:
    return x.squeeze() * 2  # removes every dim of size 1: which ones depends on the sizes


def _tail(x: torch.Tensor) -> torch.Tensor:
    return x[1:] * 2 + x.shape[0]


def _item_scale(x: torch.Tensor) -> torch.Tensor:
    k = x.flatten()[0].item()  # a graph break: the resumed graph gets k as an int input
    return x.clone() * k + 1


def _arange(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.sum() + torch.arange(abs(n), dtype=x.dtype).sum() * n


def _randn(*shape: int) -> Callable[[], tuple[torch.Tensor, ...]]:
    return lambda: (torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape))),)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a fallback to eager is a failure
@pytest.mark.parametrize("dynamic", [None, True])
def test_squeeze_of_a_dynamic_size_that_becomes_one(dynamic: bool | None) -> None:
    _compare(_squeeze, [_randn(n, 1, m) for n, m in [(4, 3), (6, 5), (1, 5), (6, 1), (1, 1), (0, 2)]], dynamic=dynamic)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("dynamic", [None, True])
def test_a_slice_of_a_dynamic_size_at_zero_and_one(dynamic: bool | None) -> None:
    _compare(_tail, [_randn(n, 3) for n in (4, 6, 0, 1, 7, 0)], dynamic=dynamic)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_data_dependent_int_that_turns_negative() -> None:
    _compare(_item_scale, [lambda v=v: (torch.full((2, 2), v),) for v in (3, 5, -4, 0, 1, 9)])


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_an_int_argument_sized_creation_at_zero_one_and_negative() -> None:
    _compare(_arange, [lambda n=n: (torch.ones(3), n) for n in (3, 5, 0, 1, -2, 8)])


def test_unbinding_a_slice_whose_symbolic_length_is_guarded() -> None:
    """``x[n // 2:]`` has the symbolic length ``s0 - s0 // 2``; unbinding it guards that length, and the pieces'
    squeeze drops a dim whose size is a symbolic expression equal to 1: read at the pieces' own strides."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        half = x[x.shape[0] // 2 :]
        total = half * 1
        for piece in half.unbind(0):
            total = total + piece.sum()
        return total

    for sizes in ((6,), (3, 6), (3, 4, 5)):
        compiler.reset()
        compiled = compiler.compile(fn, dynamic=True)
        for s0 in sizes:
            x = torch.arange(s0 * 16).reshape(s0, 4, 4)
            torch.testing.assert_close(compiled(x), fn(x))


def _last_chunk_unsqueezed(x: torch.Tensor) -> torch.Tensor:
    return x.chunk(2, -2)[-1].unsqueeze(-2)  # a view of the argument at a symbolic offset, through an aten call


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("dynamic", [None, True])
def test_a_view_of_an_argument_at_a_symbolic_offset_keeps_its_offset(dynamic: bool | None) -> None:
    """The aten call returns the view with other strides only on size-1 dims: it must stay the same view
    (AOT autograd rebuilds the output from the argument with its offset), not become a copy at offset 0."""
    _compare(_last_chunk_unsqueezed, [_randn(2, n, 1) for n in (0, 3, 5, 4)], dynamic=dynamic)
    compiler.reset()
    compiled = compiler.compile(_last_chunk_unsqueezed, backend="inductor", dynamic=dynamic)
    for n in (3, 5):
        x = torch.randn(2, n, 1)
        assert compiled(x).storage_offset() == _last_chunk_unsqueezed(x).storage_offset()


def test_a_piece_whose_symbolic_size_is_one_broadcasts_against_the_whole():
    # `x[(n + 1) // 2:]` has one element at n = 3, and `x < piece` broadcasts it: the kernel read it as n elements
    # (past its end: values from memory it never wrote) because its size was not the literal 1.
    def fn(x):
        piece = x.chunk(2, 0)[-1]
        return (x < piece) * 1, x + piece

    compiled = compiler.compile(fn, dynamic=True)
    for n in (3, 2, 3):
        x = torch.linspace(-1, 1, n)
        for got, want in zip(compiled(x), fn(x)):
            torch.testing.assert_close(got, want)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_reshape_after_a_kernel_whose_real_layout_its_fake_did_not_predict(backend: str) -> None:
    # oneDNN returns a one-channel conv1d of this transposed input channels-last; the symbolic fake says
    # contiguous, so matmul's decomposition viewed the result where eager's reshape copies.
    torch.manual_seed(0)
    conv = torch.nn.Conv1d(1, 8, 3, padding=1)

    def fn(x, w):
        return torch.matmul(conv(x / 2), w)

    def run(f, n):
        conv.zero_grad()
        x = torch.linspace(-1, 1, n * n).view(n, n, 1).mT.requires_grad_()
        out = f(x, torch.linspace(0, 1, n * 5).view(n, 5))
        out.sum().backward()
        return out.detach(), x.grad, conv.weight.grad.clone()

    compiler.reset()
    compiled = compiler.compile(fn, backend=backend, dynamic=True)
    for n in (2, 3, 1):
        torch.testing.assert_close(run(compiled, n), run(fn, n), msg=lambda m, n=n: f"size {n}: {m}")


def test_a_view_of_a_dynamic_input_keeps_the_real_strides_of_its_size_one_dims() -> None:
    # `x[::2]` of two rows has one row at stride 2 * n; the dynamic graph's fake says n. Eager's `expand_as`
    # keeps the real stride, and `mul_` refuses to write through a view whose strides differ from its operand's.
    def viewed(x):
        return x.expand_as(x)

    def written(x):
        x.expand_as(x).mul_(x)

    compiler.reset()
    compiled_view, compiled_write = compiler.compile(viewed), compiler.compile(written)
    for n in (0, 2, 3):
        x = torch.linspace(-1, 1, 2 * n).view(2, 1, n)[::2]
        assert compiled_view(x).stride() == viewed(x).stride(), n
        expected, actual = x.clone(), x.clone()
        written(expected)
        compiled_write(actual)
        torch.testing.assert_close(actual, expected)


@pytest.mark.filterwarnings("error::RuntimeWarning")  # a failed build runs the graph eagerly, with a warning
def test_a_bool_row_of_a_dynamic_backward_kernel_builds() -> None:
    # amin's backward keeps the mask of the minimum's positions per row: a bool scratch row of symbolic length,
    # once a std::vector<bool>, which has no data() and failed to compile.
    def fn(x):
        return (x**2).amin()

    compiler.reset()
    compiled = compiler.compile(fn, dynamic=True)
    for n in (3, 5):
        x_eager = torch.linspace(-1, 2, n).view(n, 1).requires_grad_()
        x_compiled = x_eager.detach().clone().requires_grad_()
        fn(x_eager).backward()
        compiled(x_compiled).backward()
        torch.testing.assert_close(x_compiled.grad, x_eager.grad)


def _broadcast_then_scaled(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    view = x.broadcast_to(like.shape)
    x *= 2
    return view


def _expanded_row_then_scaled(x: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    view = x.unsqueeze(0).expand(like.shape[0], -1)
    x.add_(1)
    return view, view.sum(0)


def _second_half_then_halves_scaled(x: torch.Tensor) -> torch.Tensor:
    half = x.chunk(2, 0)[-1]
    halves = x.unflatten(-1, (2, -1))
    halves *= 2
    return half


def _second_half_zeroed_then_rows_scaled(x: torch.Tensor) -> torch.Tensor:
    # the fuzzer's program (c32-1:2756)
    half = x.chunk(2, 0)[-1]
    half.zero_()
    rows = x.unflatten(-1, (2, -1))
    rows *= 2

    def helper(kept: torch.Tensor, unsqueezed: torch.Tensor) -> torch.Tensor:
        x.zero_()
        unsqueezed.unsqueeze_(0)
        return kept

    return helper(half, rows)


_STRIDED_VECTORS = {
    "gaps": lambda n: torch.linspace(-1, 1, 2 * n)[::2],
    "gaps at an offset": lambda n: torch.linspace(-1, 1, 2 * n + 1)[1::2],
    "offset": lambda n: torch.linspace(-1, 1, n + 1)[1:],
    "contiguous": lambda n: torch.linspace(-1, 1, n),
}


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("vector", list(_STRIDED_VECTORS))
@pytest.mark.parametrize("fn", [_broadcast_then_scaled, _expanded_row_then_scaled])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_returned_broadcast_of_a_strided_input_written_after_is_the_view_eager_returns(
    backend: str, fn: Callable[..., Any], vector: str
) -> None:
    # AOT autograd rebuilds an output aliasing a written input from the input, with the strides the compiled
    # graph returned: a broadcast materialised densely, `(n, 1)` for eager's `(0, 2)`, read other elements of
    # the input (at n = 2, silently) or past its storage.
    make = _STRIDED_VECTORS[vector]
    compiler.reset()
    compiled = compiler.compile(fn, backend=backend, dynamic=True)
    for n in (2, 3, 4):
        expected_x, actual_x = make(n), make(n)
        like = torch.zeros(n, n)
        expected, actual = fn(expected_x, like), compiled(actual_x, like)
        for got, want in zip(pytree.tree_leaves(actual), pytree.tree_leaves(expected), strict=True):
            torch.testing.assert_close(got, want, msg=lambda m, n=n: f"size {n}: {m}")
            shares_input = got.untyped_storage().data_ptr() == actual_x.untyped_storage().data_ptr()
            shared_in_eager = want.untyped_storage().data_ptr() == expected_x.untyped_storage().data_ptr()
            assert (got.stride(), got.storage_offset(), shares_input) == (
                want.stride(),
                want.storage_offset(),
                shared_in_eager,
            ), n
        torch.testing.assert_close(actual_x, expected_x)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("fn", [_second_half_then_halves_scaled, _second_half_zeroed_then_rows_scaled])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_returned_view_at_a_symbolic_offset_of_a_written_input_starts_where_eager_s_does(
    backend: str, fn: Callable[..., Any]
) -> None:
    # The returned view is computed from the written input's new value, a buffer of `(2, n // 2)`; as a new
    # buffer of its own it started at offset 0, and AOT autograd rebuilt the alias of the input at that
    # offset: the first half, silently, for eager's second.
    compiler.reset()
    compiled = compiler.compile(fn, backend=backend, dynamic=True)
    for n in (2, 4, 6):
        expected_x, actual_x = torch.linspace(-1, 1, n), torch.linspace(-1, 1, n)
        expected, actual = fn(expected_x), compiled(actual_x)
        torch.testing.assert_close(actual, expected, msg=lambda m, n=n: f"size {n}: {m}")
        assert actual.untyped_storage().data_ptr() == actual_x.untyped_storage().data_ptr()
        assert (actual.stride(), actual.storage_offset()) == (expected.stride(), expected.storage_offset()), n
        torch.testing.assert_close(actual_x, expected_x)


def _views_of_a_written_pieces_copy(x):
    piece = x.chunk(2, 1)[-1]
    piece += 2
    flat = piece.reshape(-1)  # a copy: the piece is not contiguous
    return flat.reshape(-1), flat.movedim(-1, 0)


@pytest.mark.parametrize("shape", [(2, 3, 2), (3, 5, 4)])
def test_outputs_viewing_one_intermediate_share_its_memory_with_symbolic_sizes(shape):
    # The intermediate's storage has Max(1, s40 - (s40 + 1) // 2) in its symbolic size, which its elements'
    # count was not proved equal to: each output got a buffer of its own, and a write into one missed the other.
    compiler.reset()
    compiled = compiler.compile(_views_of_a_written_pieces_copy, backend="inductor", dynamic=True)
    x = torch.randn(shape)
    results = []
    for f, arg in ((compiled, x.clone()), (_views_of_a_written_pieces_copy, x.clone())):
        first, second = f(arg)
        first.mul_(-1)  # seen through the other output, as in eager
        results.append((first, second, arg, second.stride()))
    torch.testing.assert_close(results[0], results[1])


def _sized_by_negative_arithmetic(x: torch.Tensor) -> Any:
    n = x.shape[0]
    v = -n // 3  # a negative intermediate: C's `/` and `%` truncate where Python's floor
    return torch.stack([x[: v % (n + 1)].sum(), x[: max(0, min(n, (3 - n) % 4))].sum(), torch.tensor(float(v))])


def _sized_by_a_float_remainder(x: torch.Tensor) -> Any:
    return torch.full((2,), float(x.shape[0] % 2.5)) * x.sum()


@pytest.mark.parametrize("fn", [_sized_by_negative_arithmetic, _sized_by_a_float_remainder])
def test_python_arithmetic_on_a_dynamic_size_gives_pythons_answer(fn: Callable[..., Any]) -> None:
    # A slice bounded by `-n // 3 % (n + 1)` was empty from the second size on (the kernels' C arithmetic), and
    # `n % 2.5` kept its first value: torch's guard for a float computed from a size is False, which no check
    # can evaluate, and was dropped. The float is now computed in Python at each call (a graph break).
    _compare(fn, [lambda n=n: (torch.arange(float(n)),) for n in (3, 5, 4, 7, 2, 9, 16)])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + (x.shape[0] * 2**62) % 7,  # a product past 64 bits, reduced again in Python's ints
        lambda x: x + (x.shape[0] ** 30) % 11,  # fits for 3, not for 5
    ],
    ids=["large_constant", "high_power"],
)
def test_python_int_arithmetic_on_a_dynamic_size_past_64_bits_gives_pythons_answer(fn) -> None:
    # The kernels computed these in int64 and wrapped around; Python's ints do not.
    _compare(fn, [lambda n=n: (torch.arange(float(n)),) for n in (3, 4, 5, 6)])


def _baddbmm_of_a_broadcast_input(x, a, b):
    return torch.baddbmm(x, a, b, alpha=0.5) * 2


def test_an_op_whose_meta_kernel_expands_its_input_traces_with_symbolic_sizes(caplog) -> None:
    # baddbmm's meta kernel expands its input with a C++ expand that rejects symbolic sizes: the Python
    # dispatcher's kernel does not, so the dynamic graph holds the op, with no error logged by fake tensors.
    def sized(n: int) -> Callable[[], tuple[Any, ...]]:
        return lambda: (torch.arange(float(n)), torch.full((2, n, 3), 0.5), torch.arange(6.0 * n).view(2, 3, n))

    fn = _baddbmm_of_a_broadcast_input
    with caplog.at_level("ERROR"):
        _compare(fn, [sized(n) for n in (3, 4, 5, 7)], fullgraph=True)
    assert not [r for r in caplog.records if r.levelname == "ERROR"], [r.getMessage() for r in caplog.records]
    assert compiler.explain(fn)(*sized(6)()).graph_break_count == 0


def _int_past_64_bits(x: torch.Tensor, n: int) -> torch.Tensor:
    return x * (n % 1000) + (n > 2**40)


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("dynamic", [None, True])
def test_an_int_argument_past_64_bits_after_a_dynamic_recompile_gives_pythons_answer(dynamic: bool | None) -> None:
    # A dynamic int reached the kernels as an int64 ("OverflowError: int too big to convert" at 2**63, where eager
    # computes in Python's ints): a graph's ints are now int64 by their guards, and a larger one is a constant.
    values = (3, 4, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**70, 17)
    _compare(_int_past_64_bits, [lambda n=n: (torch.ones(3), n) for n in values], dynamic=dynamic)


_CONVERTED_NUMBERS = {
    "where": lambda x, n: torch.where(x > 0, x, n),
    "masked_fill": lambda x, n: x.masked_fill(x > 0, n),
    "masked_fill_": lambda x, n: x.masked_fill_(x > 0, n),
    "masked_fill_one_element": lambda x, n: x[:1].masked_fill(x[:1] < 0, n),
    "full": lambda x, n: torch.full((2,), n, dtype=x.dtype) + x[:2],
}


@pytest.mark.parametrize("dtype", [torch.int32, torch.float16, torch.uint8], ids=str)
@pytest.mark.parametrize("op", list(_CONVERTED_NUMBERS))
def test_a_symbolic_number_the_dtype_cannot_hold_raises_eagers_error(op: str, dtype: torch.dtype) -> None:
    # Eager converts these numbers checked ("value cannot be converted to type int without overflow"; `where`
    # converts as a wrapped scalar, unchecked); once the int was a graph input, the kernels wrapped it.
    fn = _CONVERTED_NUMBERS[op]
    compiler.reset()
    compiled = compiler.compile(fn, backend="inductor", dynamic=True)
    for n in (3, 4, 2**40 + 3, 70000, -1, 2**31, 5):
        x = torch.arange(-3, 3).to(dtype)
        try:
            expected, raised = fn(x.clone(), n), None
        except RuntimeError as err:
            expected, raised = None, err
        if raised is not None:
            with pytest.raises(RuntimeError, match="cannot be converted"):
                compiled(x.clone(), n)
        else:
            torch.testing.assert_close(compiled(x.clone(), n), expected, msg=lambda m, n=n: f"n={n}: {m}")


def test_a_shape_condition_on_an_int_as_a_float_is_a_guard_python_evaluates() -> None:
    # torch prints such a condition `torch.sym_float(L['n']) <= 65504.0`, a name guards do not bind: the guard
    # raised NameError at every call, which is a miss, so each call compiled again.
    counter = capture.testing.CompileCounter()
    fn = capture.optimize(counter, dynamic=True)(lambda x, n: torch.full((2,), n, dtype=torch.float16) + x)
    for n in (3, 4, 5, 6):
        torch.testing.assert_close(fn(torch.ones(2, dtype=torch.float16), n), torch.full((2,), n + 1.0).half())
    assert counter.frame_count == 1


def _arange_of_a_count_across_a_break(x: torch.Tensor) -> torch.Tensor:
    print(end="")  # the count crosses a break as an int argument of the resume function
    n = x.numel()
    print(end="")
    return torch.arange(n).view(x.shape)


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_an_int_equal_to_a_product_of_sizes_compiles():
    # a279.0:130. A dynamic int argument was bounded by int64; equated with `5 * size`, the shape env solved the
    # size's bound through a float ((2**63 - 1) / 5 rounded up) and refused the product as out of the int's range:
    # the compile failed ("tgt_bound ... not a subset of src_bound"). Ints are now bounded by 2**53.
    _compare(_arange_of_a_count_across_a_break, [lambda s=s: (torch.ones(5, s),) for s in (0, 2, 3, 7)])
