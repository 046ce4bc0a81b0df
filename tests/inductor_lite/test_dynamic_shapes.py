"""Dynamic graphs: compiled once with symbolic sizes, correct at every size, no new kernels after the first call."""

from __future__ import annotations

import logging
import os
import re

import pytest
import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from dyn_helpers import check_sizes, compare, symbolic_graph

from dynajit.fxgraph import set_logs
from dynajit.inductor_lite import cache_stats, compile_fx, compiled_graphs

SIZES = (5, 2, 3, 7, 64, 129)


def _x(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape).to(dtype)


def test_pointwise_chain_with_broadcasting() -> None:
    def fn(x, y, z):
        return torch.sigmoid(x * 2 + y).relu() - z, (x + z).tanh() * y.exp()

    c = check_sizes(fn, lambda n: [_x(n, 6), _x(6), _x(n, 1)], [{0: None}, None, {0: None}])
    (forward,) = compiled_graphs(c)
    assert "int64_t s" in forward.kernel_source and forward.info["symbols"]


def test_pointwise_over_two_dynamic_dims_and_a_transposed_input() -> None:
    def fn(x, y, z):
        return x * 3 + y.t(), (x.t() - 1).abs(), z.exp() + x, z.sum(0)

    def inputs(n):
        return [_x(n, n + 3), _x(n + 3, n), _x(n + 3, n).t()]

    specs = [{0: None, 1: None}, {0: None, 1: None}, {0: None, 1: None}]
    c = check_sizes(fn, inputs, specs, atol=1e-5, rtol=1e-5)
    # The kernels read z through its transposed strides: a contiguous z runs the graph's aten ops instead.
    args = [_x(4, 7), _x(7, 4), _x(4, 7)]
    compare(c(*args), fn(*args), 1e-5, 1e-5)


@pytest.mark.parametrize(
    "reduce",
    [
        lambda x: x.sum(-1),
        lambda x: x.mean(0),
        lambda x: x.amax(-1, keepdim=True),
        lambda x: x.var(-1),
        lambda x: x.argmax(-1),
        lambda x: x.argmin(0),
        lambda x: x.sum(),
    ],
    ids=["sum_static_dim", "mean_dynamic_dim", "amax_keepdim", "var", "argmax", "argmin_dynamic", "sum_all"],
)
def test_reductions_over_dynamic_and_static_dims(reduce) -> None:
    check_sizes(lambda x: reduce(x * 1.5), lambda n: [_x(n, 9)], [{0: None}], atol=1e-5, rtol=1e-5)


def test_reductions_over_a_dynamic_inner_dim() -> None:
    def fn(x):
        return (
            x.sum(-1), x.mean(-1), x.amax(-1), x.var(-1), x.argmax(-1), torch.var_mean(x, -1, correction=0), x.std(-1),
        )  # fmt: skip

    check_sizes(fn, lambda n: [_x(3, n + 1)], [{1: None}], atol=1e-4, rtol=1e-4)


def test_softmax_and_layer_norm_over_dynamic_batch_and_sequence() -> None:
    norm = torch.nn.LayerNorm(16)

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = norm

        def forward(self, x):
            return torch.softmax(x, -1), torch.log_softmax(x, 1), self.norm(x), F.layer_norm(x, (16,))

    with torch.no_grad():
        check_sizes(M(), lambda n: [_x(2, n, 16)], [{0: None, 1: None}], sizes=(5, 3, 7, 64), atol=1e-5, rtol=1e-5)


def test_views_reshape_and_permute_with_symbolic_sizes() -> None:
    def fn(x):
        flat = x.view(x.size(0), -1)
        return flat * 2, x.permute(2, 0, 1).reshape(4, -1).sum(0), x.transpose(0, 1).contiguous(), flat[:, 3:9].sum(1)

    check_sizes(fn, lambda n: [_x(n, 3, 4)], [{0: None}], atol=1e-5, rtol=1e-5)


def test_matmul_and_linear_externs_with_dynamic_batch() -> None:
    lin = torch.nn.Linear(8, 5)

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = lin

        def forward(self, x, y):
            return self.lin(x).relu(), torch.bmm(y, y.transpose(1, 2)) + 1, x @ x.t()

    with torch.no_grad():
        check_sizes(M(), lambda n: [_x(n, 8), _x(n, 4, 3)], [{0: None}, {0: None}], atol=1e-5, rtol=1e-5)


def test_convolution_extern_with_dynamic_batch_and_image_size() -> None:
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = conv

        def forward(self, x):
            y = self.conv(x)
            return torch.relu(y).mean((2, 3)), y.amax(1)

    with torch.no_grad():
        check_sizes(
            M(), lambda n: [_x(n, 3, n + 4, 2 * n + 4)], [{0: None, 2: None, 3: None}], sizes=(4, 2, 5, 9),
            atol=1e-4, rtol=1e-4,
        )  # fmt: skip


def test_mixed_dtypes() -> None:
    def fn(x, i, h):
        return (x * i).sum(-1), (h.float() + x).half(), (i * 3 // 2).to(torch.int32), (x > 0) & (i > 1)

    def inputs(n):
        return [_x(n, 6), torch.randint(0, 5, (n, 6)), _x(n, 6, dtype=torch.float16)]

    check_sizes(fn, inputs, [{0: None}] * 3, atol=1e-3, rtol=1e-3)


def test_inputs_sharing_a_symbol_and_a_mismatch_is_an_error() -> None:
    def fn(a, b):
        return a + b, (a * b).sum()

    c = check_sizes(fn, lambda n: [_x(n, 4), _x(n, 4)], [{0: None}, {0: None}], atol=1e-5, rtol=1e-5)
    with pytest.raises(RuntimeError, match="shape relations"):
        c(_x(3, 4), _x(4, 4))


def test_a_placeholder_without_an_example_value_stays_static() -> None:
    def fn(x, w):
        return x * w + 1, (x @ w.t()).sum(-1)

    gm, _ = symbolic_graph(fn, [_x(5, 4), _x(4)], [{0: None}, None])
    del next(n for n in gm.graph.nodes if n.name == "w").meta["example_value"]
    c = compile_fx(gm, [_x(5, 4), _x(4)])
    assert compiled_graphs(c)[0].info["dynamic"]
    before = cache_stats()
    for n in (5, 3, 9):
        x, w = _x(n, 4), _x(4)
        compare(c(x, w), fn(x, w), 1e-5, 1e-5)
    assert cache_stats() == before


def test_a_symbolic_int_input() -> None:
    def fn(x, n):
        return x * n + 1, x.sum(-1) / n, torch.arange(n) * 2 + x.size(0)

    first = [_x(12, 4), 4]
    gm, mode = symbolic_graph(fn, first, [None, "int"])
    c = compile_fx(gm, first)
    # n stays a symbol: the facts recorded only say it is at least 2 (an int may be negative; arange(n) and
    # contiguity need more), which the caller's guards enforce
    for value, holds in [(-1, False), (0, False), (1, False), (2, True), (9, True)]:
        assert all(bool(g.expr.subs(dict.fromkeys(g.expr.free_symbols, value))) for g in mode.shape_env.guards) is holds
    assert "scalar1" in compiled_graphs(c)[0].wrapper_source
    before = cache_stats()
    for n in (4, 2, 3, 6):
        x = _x(12, 4)
        compare(c(x, n), fn(x, n), 1e-5, 1e-5)
    assert cache_stats() == before


def test_an_int_specialised_while_tracing_is_checked_at_call_time() -> None:
    def fn(x, n):
        return x.view(-1, n).sum(-1)

    first = [_x(12, 4), 4]
    gm, mode = symbolic_graph(fn, first, [None, "int"])
    c = compile_fx(gm, first)
    assert mode.shape_env.guards  # the view fixed n: a guard for the caller to enforce
    x = _x(12, 4)
    compare(c(x, 4), fn(x, 4), 1e-5, 1e-5)
    with pytest.raises(RuntimeError, match="shape relations"):
        c(x, 3)


def test_no_guards_are_added_for_pointwise_and_reductions() -> None:
    def fn(x, y):
        return (x * y).softmax(-1), x.sum(0), x.view(-1).amax()

    gm, mode = symbolic_graph(fn, [_x(5, 7), _x(5, 7)], [{0: None, 1: None}, {0: None, 1: None}])
    compile_fx(gm, [_x(5, 7), _x(5, 7)])
    assert not mode.shape_env.guards


def test_max_autotune_tunes_at_the_example_sizes_and_output_code_shows_symbolic_code(caplog) -> None:
    set_logs("output_code")
    try:
        with (
            caplog.at_level(logging.INFO, logger="dynajit.output_code"),
            caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"),
        ):
            c = check_sizes(
                lambda x: (x.exp() + 1, x.sum(-1)), lambda n: [_x(n, 40)], [{0: None}], sizes=(9, 2, 65),
                options={"max_autotune": True},
            )  # fmt: skip
    finally:
        set_logs(output_code=False)
    (forward,) = compiled_graphs(c)
    assert "inductor-lite autotune: " in caplog.text and forward.info["tuned"] is not None
    assert re.search(r"const int64_t s\d+\) \{", caplog.text) and re.search(r"s\d+ = arg0\.size\(0\)", caplog.text)


def test_an_op_without_a_symbolic_lowering_falls_back_to_aten(caplog) -> None:
    def fn(x, n):
        return torch.pow(x, n) + 1, x.sum(0) * 2

    first = [_x(6, 3), 3]
    gm, _ = symbolic_graph(fn, first, [{0: None}, "int"])
    with caplog.at_level(logging.INFO, logger="dynajit.inductor_lite"):
        c = compile_fx(gm, first)
    assert "symbolic scalar argument for aten.pow" in caplog.text
    (forward,) = compiled_graphs(c)
    assert forward.info["kernels"] >= 1 and any("pow" in f for f in forward.info["fallbacks"])
    for size, n in ((6, 3), (9, 2), (4, 5)):
        x = _x(size, 3)
        compare(c(x, n), fn(x, n), 1e-5, 1e-5)


def test_mlp_forward_and_backward_with_dynamic_batch() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3))
    gm, _ = symbolic_graph(model, [_x(5, 6)], [{0: None}])
    x0 = _x(5, 6).requires_grad_(True)
    c = compile_fx(gm, [x0])
    c(x0).sum().backward()
    before = cache_stats()
    assert len(compiled_graphs(c)) == 2 and all(g.info["kernels"] for g in compiled_graphs(c))
    for n in (2, 3, 7, 64, 129):
        x = _x(n, 6)
        xc, xe = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        model.zero_grad()
        out = c(xc)
        (out * torch.arange(3.0)).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        model.zero_grad()
        expected = model(xe)
        (expected * torch.arange(3.0)).sum().backward()
        torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(xc.grad, xe.grad, atol=1e-5, rtol=1e-5)
        for g, p in zip(grads, model.parameters()):
            torch.testing.assert_close(g, p.grad, atol=1e-4, rtol=1e-4)
    assert cache_stats() == before and len(compiled_graphs(c)) == 2


class Block(torch.nn.Module):
    """A small transformer block: attention with a causal mask, MLP, residuals, layer norms."""

    def __init__(self, dim: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5)
        mask = torch.ones_like(att[0, 0], dtype=torch.bool).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


def test_transformer_block_trains_with_dynamic_batch_and_sequence() -> None:
    torch.manual_seed(0)
    block = Block()
    gm, mode = symbolic_graph(block, [_x(2, 5, 16)], [{0: None, 1: None}])
    x0 = _x(2, 5, 16).requires_grad_(True)
    c = compile_fx(gm, [x0])
    c(x0).sum().backward()
    assert not mode.shape_env.guards
    before = cache_stats()
    for b, t in ((3, 7), (2, 2), (4, 33)):
        x = _x(b, t, 16)
        xc, xe = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        block.zero_grad()
        out = c(xc)
        (out * out).sum().backward()
        grads = [p.grad.clone() for p in block.parameters()]
        block.zero_grad()
        expected = block(xe)
        (expected * expected).sum().backward()
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(xc.grad, xe.grad, atol=1e-4, rtol=1e-4)
        for g, p in zip(grads, block.parameters()):
            torch.testing.assert_close(g, p.grad, atol=1e-3, rtol=1e-3)
    assert cache_stats() == before
    assert [g.info["fallbacks"] for g in compiled_graphs(c)] == [[], []]


def test_transformer_block_with_dynamic_batch_and_sequence() -> None:
    torch.manual_seed(0)
    block = Block()
    with torch.no_grad():
        check_sizes(
            block, lambda n: [_x(2 + n % 3, n, 16)], [{0: None, 1: None}], sizes=(5, 3, 7, 33), atol=1e-4, rtol=1e-4
        )


triton_interpreter = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="needs TRITON_INTERPRET=1 when triton is imported"
)


@triton_interpreter
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy math on masked-off lanes
def test_triton_kernels_take_sizes_as_arguments() -> None:
    pytest.importorskip("triton")

    def fn(x, y):
        return (
            torch.sigmoid(x * 2 + y).relu(),
            x.sum(-1),
            x.mean(0),
            x.argmax(-1),
            torch.softmax(x, -1),
            x.var(-1),
            x.t() * 2,
        )

    c = check_sizes(
        fn, lambda n: [_x(n, n + 2), _x(n + 2)], [{0: None, 1: None}, {0: None}], sizes=(5, 2, 3, 7, 33),
        atol=1e-5, rtol=1e-5, options={"cpu_backend": "triton"},
    )  # fmt: skip
    (forward,) = compiled_graphs(c)
    assert "@triton.jit(do_not_specialize=" in forward.kernel_source
    # Sizes are plain arguments; only the block sizes are constexpr.
    assert re.search(
        r"def kernel0\(p0, [^)]*\bs\d+, XBLOCK: tl.constexpr, RBLOCK: tl.constexpr\)", forward.kernel_source
    )


def test_threading_is_decided_at_run_time_and_long_rows_use_heap_scratch() -> None:
    def fn(x):
        return torch.softmax(x, -1), (x * 2).exp() + 1

    c = check_sizes(fn, lambda n: [_x(n, 40 * n)], [{0: None, 1: None}], sizes=(3, 2, 40), atol=1e-5, rtol=1e-5)
    source = compiled_graphs(c)[0].kernel_source
    assert re.search(r"#pragma omp parallel for .*if\(.*s\d+.* >= 32768\)", source)
    assert "static thread_local std::vector<float> scratch_" in source


def test_column_block_reductions_with_symbolic_rows_and_columns() -> None:
    def fn(x):
        return x.sum(0), x.amax(0) * 2, x.mean(0)

    c = check_sizes(fn, lambda n: [_x(2 * n + 70, n + 130)], [{0: None, 1: None}], atol=1e-4, rtol=1e-5)
    (forward,) = compiled_graphs(c)
    assert "_b += 128" in forward.kernel_source


def test_a_size_with_max_prints_in_cpp_kernels() -> None:
    # view(3, -1, cols) gives a row count of max(1, rows // 3) in the kernels' indices.
    c = check_sizes(
        lambda x: (x.view(3, -1, x.shape[1]).mean(1),), lambda n: [_x(3 * (n + 50), n + 131)], [{0: None, 1: None}],
        atol=1e-4, rtol=1e-5,
    )  # fmt: skip
    assert "dj_imax(" in compiled_graphs(c)[0].kernel_source


def _heads_of_a_grown_cache(x):  # a KV cache grown by one step, split into heads and laid out per head
    grown = torch.cat([x, x[:, :1]], 1)
    return (grown.view(2, -1, 2, 16).transpose(1, 2).contiguous().view(4, -1, 16).sum(1),)


def _channels_of_a_grown_sequence(x):
    return (torch.cat([x, x[:, :1]], 1).view(2, -1, 4, 8).transpose(1, 2).reshape(2, 4, -1).sum(-1),)


@pytest.mark.parametrize("fn", [_heads_of_a_grown_cache, _channels_of_a_grown_sequence])
def test_a_stride_divided_by_a_symbolic_size_is_a_polynomial_in_kernels(fn, caplog) -> None:
    # (32*s + 32) / (8*s + 8) stayed a fraction, which no kernel can index with: the graph ran through aten
    with caplog.at_level(logging.WARNING, logger="dynajit.inductor_lite"):
        c = check_sizes(fn, lambda n: [_x(2, n, 32)], [{1: None}], atol=1e-5, rtol=1e-5)
    assert "through aten" not in caplog.text
    assert not compiled_graphs(c)[0].info["fallbacks"]


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_float_computed_from_sizes_is_evaluated_per_call(backend) -> None:
    if backend == "triton":
        pytest.importorskip("triton")
        if os.environ.get("TRITON_INTERPRET") != "1":
            pytest.skip("needs TRITON_INTERPRET=1 when triton is imported")

    def fn(x):
        n = x.shape[0] * x.shape[1]
        return x * (n / (n - 1.0)) + x.shape[0] / 4, x.var(0)

    check_sizes(fn, lambda n: [_x(n + 1, 6)], [{0: None}], atol=1e-5, rtol=1e-5, options={"cpu_backend": backend})


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.full_like(x, 2)[:, 1:],
        lambda x: (x * 2).chunk(2, 1)[-1],
        lambda x: ((x * 2).chunk(2, 1)[-1], x.sum()),
    ],
    ids=["slice_of_fill", "chunk_of_product", "chunk_and_sum"],
)
def test_a_slice_of_a_dynamic_intermediate_is_a_view_of_it_as_in_eager(fn) -> None:
    # Eager returns a view of the whole intermediate, with its row stride; its symbolic gaps once made the output a
    # dense buffer of its own (strides (2, 1) where eager's are (4, 1)).
    gm, _ = symbolic_graph(fn, [_x(3, 4)], [{0: None, 1: None}])
    compiled = compile_fx(gm, [_x(3, 4)])
    for shape in ((3, 4), (5, 7), (2, 2)):
        x = _x(*shape)
        for actual, expected in zip(pytree.tree_leaves(compiled(x.clone())), pytree.tree_leaves(fn(x.clone()))):
            assert actual.stride() == expected.stride(), (shape, actual.stride(), expected.stride())
            torch.testing.assert_close(actual, expected)


def test_a_view_into_whole_rows_of_a_dynamic_vector_reads_it_without_a_modulo() -> None:
    # `x.view(8, -1)` of a vector of `s` elements reads `x[(s // 8) * i + j]`, below `s`: intervals bounded
    # `s - 8 * (s // 8)` as if `s // 8` could be anything, so each read also took `% s` (one more division per
    # element). Written with `s % 8` the bound is [0, 7].
    def fn(x):
        return x.view(8, -1).sum(1)

    c = check_sizes(fn, lambda n: [_x(8 * n)], [{0: None}], sizes=(5, 3, 9), atol=1e-5, rtol=1e-5)
    source = compiled_graphs(c)[0].kernel_source
    assert not re.search(r"% s\d+\)?\]", source), source
