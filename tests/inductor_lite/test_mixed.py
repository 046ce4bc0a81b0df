"""Mixed cases: views of non-contiguous values, integer arithmetic, fallbacks, padding, arange, flips."""

import re

import pytest
import torch
from ilite_helpers import check, check_cases, compiled
from torch.fx.experimental.proxy_tensor import make_fx

CASES = {
    "t_reshape": lambda x, i: x.t().reshape(-1) * 2,
    "t_view_sum": lambda x, i: x.t().contiguous().view(4, 12).sum(0),
    "int_sub_alpha": lambda x, i: torch.sub(i, i * 2, alpha=3),
    "masked_fill_tensor": lambda x, i: x.masked_fill(i > 0, torch.tensor(2.0)),
    "where_scalars": lambda x, i: torch.where(i > 0, 1.0, -1.0),
    "int_pow_neg": lambda x, i: torch.pow(i, 2),
    "div_int_scalar": lambda x, i: i / 3,
    "mean_int_as_float": lambda x, i: i.float().mean(0),
    "argmax_ties": lambda x, i: i.argmax(1),
    "min_dim_int": lambda x, i: i.min(1).values,
    "cumsum_fallback": lambda x, i: x.cumsum(0) + 1,
    "topk_fallback": lambda x, i: x.topk(3, 1).values * 2,
    "expand_reshape": lambda x, i: x[:, None, :].expand(6, 3, 8).reshape(18, 8).sum(1),
    "permute_sum_mid": lambda x, i: x.view(2, 3, 8).sum(1),
    "var_int_dim": lambda x, i: x.view(2, 3, 8).var((0, 2)),
    "amax_multi": lambda x, i: x.view(2, 3, 8).amax((0, 2), keepdim=True),
    "softmax_dim0": lambda x, i: torch.softmax(x.view(2, 3, 8), 1),
    "bool_mul": lambda x, i: (i > 0) * (i < 3),
    "neg_slice_step": lambda x, i: x[:, 1::3][:, :2] + x[:, ::3][:, :2],
    "full_like": lambda x, i: torch.full_like(x, 3.5) + torch.zeros_like(i),
    "arange": lambda x, i: torch.arange(8) * x,
    "arange_float": lambda x, i: torch.arange(0.5, 4.5, 0.5) + x,
    "sum_dtype": lambda x, i: i.sum(1, dtype=torch.float64),
    "flip": lambda x, i: x.flip(1) - x,
    "roll": lambda x, i: x.roll(2, 1),
    "pad": lambda x, i: torch.nn.functional.pad(x, (1, 2)) * 2,
    "tril": lambda x, i: x.tril(),
    "clamp_int": lambda x, i: i.clamp(min=-2),
}


def test_mixed_cases():
    x = torch.randn(6, 8)
    i = torch.randint(-5, 5, (6, 8))
    assert check_cases(CASES, x, i, atol=1e-5, rtol=1e-5) == len(CASES)


@pytest.mark.parametrize("cell", [torch.nn.LSTM, torch.nn.GRU])
def test_an_aten_call_gets_the_layout_its_graph_gave_its_argument(cell):
    # The fused RNN ops read their input as contiguous whatever its strides say: passing them a
    # transposed view of the batch-first input (which a lowered clone would be) gave wrong numbers.
    from torch.fx.experimental.proxy_tensor import make_fx

    torch.manual_seed(0)
    rnn = cell(8, 16, num_layers=2, batch_first=True).eval()
    x = torch.randn(3, 5, 8)
    with torch.no_grad():
        graph = make_fx(lambda x: rnn(x))(x)
        check(graph, x)


def test_aten_calls_go_through_torch_s_generated_python_functions():
    """An extern call of a ``default`` overload no other overload can take the same arguments of is made
    through torch's generated function (``torch.mm``: the arguments are parsed in C++, not by the overload
    object in Python); values are eager's."""
    from dynajit.inductor_lite._compile import compiled_graphs
    from dynajit.inductor_lite._wrapper import python_binding

    aten = torch.ops.aten
    assert python_binding(aten.mm.default) is torch.mm  # mm.dtype needs out_dtype, mm.out needs out
    assert python_binding(aten.cat.default) is torch.cat
    assert python_binding(aten.convolution.default) is torch.convolution
    assert python_binding(aten.sum.default) is aten.sum.default  # sum.int takes sum.default's arguments
    assert python_binding(aten.add.Tensor) is aten.add.Tensor  # not a default overload
    c = check(lambda a, b, w: torch.cat([a @ b, a], 1).mm(w), torch.randn(4, 3), torch.randn(3, 5), torch.randn(8, 2))
    namespace = compiled_graphs(c)[0].call.__globals__
    assert torch.mm in namespace.values()
    assert not any(isinstance(v, torch._ops.OpOverload) and v.overloadpacket is aten.mm for v in namespace.values())


_LOSSES = ["binary_cross_entropy", "binary_cross_entropy_with_logits", "mse_loss", "huber_loss", "smooth_l1_loss",
           "soft_margin_loss", "hinge_embedding_loss"]  # fmt: skip


@pytest.mark.parametrize("name", _LOSSES)
def test_an_aten_call_through_a_python_function_passes_the_schemas_defaults(name):
    """torch's generated function does not always share the schema's defaults: ``torch._C._nn.mse_loss(a, b)``
    does not reduce, where ``aten.mse_loss.default(a, b)`` means ``reduction=Mean``. The wrapper passes every
    argument the graph's call left out as the schema has it."""
    from dynajit.inductor_lite._wrapper import python_binding, with_defaults

    op = getattr(torch.ops.aten, name).default
    a, b = torch.rand(5), torch.rand(5)
    binding = python_binding(op)
    assert binding is not op
    args, kwargs = with_defaults(op, [a, b], {})
    torch.testing.assert_close(binding(*args, **kwargs), op(a, b))
    args, kwargs = with_defaults(op, [a], {"target": b} if "target" in str(op._schema) else {"other": b})
    torch.testing.assert_close(binding(*args, **kwargs), op(a, b))


_ENUM_DEFAULTS = {
    "randperm": lambda x: x[torch.randperm(x.shape[0])],
    "randint": lambda x: x + torch.randint(0, 9, x.shape),
    "tril_indices": lambda x: x[torch.tril_indices(x.shape[0], 3)[1]],
    "triu_indices": lambda x: torch.triu_indices(x.shape[0], 2, 1) * x.shape[0],
}


@pytest.mark.parametrize("name", list(_ENUM_DEFAULTS))
def test_an_aten_call_leaves_a_dtype_default_to_the_python_function(name):
    """A schema's ``dtype=long`` default is the enum's number, which ``torch.randperm(8, dtype=4)`` refuses: the
    compiled call raised TypeError where eager ran. The function's own default is the same."""
    fn, x = _ENUM_DEFAULTS[name], torch.arange(8.0)
    compiled_fn = compiled(make_fx(fn)(x), x)
    torch.manual_seed(0)
    expected = fn(x)
    torch.manual_seed(0)
    torch.testing.assert_close(compiled_fn(x), expected)


def test_matrix_products_are_taken_as_aten_returns_them():
    """A CPU matrix product's result is a new contiguous tensor, as compiled: the wrapper checks no strides of
    it at every call (a transformer step makes dozens); values and strides are eager's."""
    from dynajit.inductor_lite._compile import compiled_graphs

    def products(a, b, w, bias):
        return torch.cat([a @ b, a], 1).mm(w), torch.bmm(a[None], b[None]), torch.addmm(bias, a, b)

    c = check(products, torch.randn(4, 3), torch.randn(3, 5), torch.randn(8, 2), torch.randn(5))
    graph = compiled_graphs(c)[0]
    names = {k for k, v in graph.call.__globals__.items() if any(v is op for op in (torch.mm, torch.bmm, torch.addmm))}
    calls = [line for line in graph.wrapper_source.splitlines() if any(f"{name}(" in line for name in names)]
    assert len(calls) == 4 and not any("restride(" in line for line in calls), graph.wrapper_source


def test_a_linear_layer_calls_linear_on_its_weight_and_reads_a_kernel_buffer_as_allocated():
    """``mm(x, w.T)`` of a contiguous weight is ``linear(x, w)`` (the call ``nn.Linear`` makes: no view of ``w``
    in Python at every call), and a kernel buffer every aten call reads whole through one other shape (a
    (2, 8, 32) norm read by ``mm`` as (16, 32)) is allocated in that shape: the wrapper makes no view of
    either. Values are eager's, with a bias (``addmm``) and without."""
    from torch import nn

    from dynajit.inductor_lite._compile import compiled_graphs

    torch.manual_seed(0)
    norm, up, down = nn.LayerNorm(32), nn.Linear(32, 64), nn.Linear(64, 32, bias=False)

    def block(x):
        return down(torch.relu(up(norm(x)))) + x

    with torch.no_grad():
        gm = make_fx(block)(torch.randn(2, 8, 32))
        c = check(gm, torch.randn(2, 8, 32), atol=1e-5, rtol=1e-5)
    source = compiled_graphs(c)[0].wrapper_source
    assert "as_strided" not in source, source
    assert len(re.findall(r"= new\d+\(\(16, 32\), \(32, 1\)\)", source)) == 1, source  # (allocated once)
    assert torch._C._nn.linear in compiled_graphs(c)[0].call.__globals__.values()


def test_aten_calls_returning_new_tensors_run_below_autograd():
    """A matrix product returns a new tensor: the wrapper calls it below autograd's dispatch layers (about a
    microsecond a call), with the ``del``s between such calls; a view op is never among them. Values are eager's."""
    from dynajit.inductor_lite._compile import compiled_graphs

    def fn(x, w, v):
        return torch.relu(x @ w) @ w.t(), (x * 2).mm(v)

    c = check(fn, torch.randn(4, 8), torch.randn(8, 8), torch.randn(8, 3))
    source = compiled_graphs(c)[0].wrapper_source
    lines = source.splitlines()
    calls = [i for i, line in enumerate(lines) if "= op" in line and "(" in line]
    assert calls and all(lines[i].startswith("        ") for i in calls), source
    assert all(line.strip() in ("with below_autograd():",) or not line.strip().startswith("with") for line in lines)


@pytest.mark.parametrize("rows", [4, 2048])
def test_small_kernels_an_aten_call_separates_run_as_one(rows):
    """A small value that reads nothing an aten call makes joins an earlier kernel of its shape (one call a step
    fewer: a training step's small masks and norms); a large one stays in graph order, where its memory is
    held no longer than eager holds it. Values are eager's either way."""
    from dynajit.inductor_lite._compile import compiled_graphs

    def fn(x, w):
        product = torch.sin(x * 2) @ w
        return product.sum(0), torch.cos(x + 1)  # the cosine comes after the column sums, a kernel of their own

    # (the column sums of 2048 rows add in another order than eager's)
    torch.manual_seed(0)
    c = check(fn, torch.randn(rows, 16), torch.randn(16, 16), atol=1e-3, rtol=1e-4)
    assert compiled_graphs(c)[0].info["kernels"] == (2 if rows == 4 else 3)


@pytest.mark.parametrize("rows", [4, 2048])
def test_a_small_aten_call_runs_before_the_kernel_it_would_split(rows):
    """A gated MLP: ``silu(gate)`` is one kernel, ``silu(gate) * up`` another, the ``up`` projection between them.
    A small aten call that reads nothing the kernel before it writes runs first, and the two kernels are one; a
    large one stays in graph order (its result would be held longer). Values are eager's either way."""
    from dynajit.inductor_lite._compile import compiled_graphs

    def fn(x, w_gate, w_up):
        gate = torch.nn.functional.silu(x @ w_gate)
        return gate * (x @ w_up), gate

    torch.manual_seed(0)
    c = check(fn, torch.randn(rows, 16), torch.randn(16, 16), torch.randn(16, 16), atol=1e-4, rtol=1e-4)
    assert compiled_graphs(c)[0].info["kernels"] == (1 if rows == 4 else 2)


def test_kernels_with_one_body_are_compiled_once():
    """Kernels that differ in name only (a block repeated at one shape) are one function in the library, called
    for each; values are eager's."""
    from dynajit.inductor_lite._compile import compiled_graphs

    def fn(x, w):
        a = torch.sin(x * 2)
        b = torch.sin((a @ w) * 2)
        return torch.sin((b @ w) * 2)

    c = check(fn, torch.randn(8, 8), torch.randn(8, 8), atol=1e-5, rtol=1e-5)
    graph = compiled_graphs(c)[0]
    assert graph.info["kernels"] == 3
    # (the first kernel's pointers are declared not to alias; the later two may write where they read)
    assert graph.kernel_source.count('extern "C" void kernel') == 2, graph.kernel_source


@pytest.mark.parametrize("beta", [1, 0.5])
def test_baddbmm_of_a_transposed_input_is_laid_out_as_eagers_kernel_lays_it(beta):
    # eager's kernel returns a contiguous result; the decomposition's final add followed the transposed input's
    # strides: (3, 9, 1) where eager's are (9, 3, 1).

    def fn(x, b1, b2):
        return torch.baddbmm(x[..., :1], b1, b2, beta=beta)

    g = torch.Generator().manual_seed(0)
    x, b1, b2 = torch.randn(3, 3, 3, generator=g).transpose(0, 1), torch.randn(3, 3, 4), torch.randn(3, 4, 3)
    actual, expected = compiled(make_fx(fn)(x, b1, b2), x, b1, b2)(x, b1, b2), fn(x, b1, b2)
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected)
