"""Views as index arithmetic, broadcasting, non-contiguous inputs and zero-size tensors."""

import torch
from ilite_helpers import check, check_cases

from dynajit.inductor_lite import compiled_graphs

VIEWS = {
    "view": lambda x: x.view(6, 20) * 2, "reshape_flat": lambda x: x.reshape(-1) + 1, "permute": lambda x: x.permute(2, 0, 1) * 3,
    "transpose": lambda x: x.transpose(0, 2) - 1, "t_of_view": lambda x: x.view(6, 20).t().exp(),
    "expand": lambda x: x[:, :1].expand(2, 3, 20) + x, "slice": lambda x: x[:, 1:, ::3] * 2,
    "select": lambda x: x[1] + x[0], "select_last": lambda x: x[..., -1] * 2, "unsqueeze": lambda x: x.unsqueeze(1) * 2,
    "squeeze": lambda x: x[:, :1].squeeze(1) + 1, "flatten": lambda x: x.flatten(1).sin(),
    "permute_reshape": lambda x: x.permute(1, 0, 2).reshape(3, 40) + 1, "narrow": lambda x: x.narrow(2, 5, 10) * 2,
    "view_of_lazy": lambda x: (x * 2).view(2, 60).sum(1), "permute_of_lazy": lambda x: (x + 1).permute(2, 1, 0).cos(),
    "reshape_split": lambda x: x.reshape(2, 3, 4, 5).sum(2), "unflatten": lambda x: x.unflatten(2, (4, 5)).amax(-1),
    "chunk": lambda x: x.chunk(2, -1)[1] * 2, "split": lambda x: x.split(7, -1)[2] + 1, "flip_cat": lambda x: torch.cat([x, x * 2], 1),
    "diagonal": lambda x: x[0].diagonal() * 2, "movedim": lambda x: x.movedim(0, -1).sum(0), "T": lambda x: x[0].T * 1,
    "stack": lambda x: torch.stack([x, x + 1], 0), "repeat": lambda x: x[:, :, :2].repeat(1, 2, 3) + 1,
    "mT": lambda x: x.mT.contiguous() * 2, "view_as_real_like": lambda x: x.view(2, 3, 10, 2)[..., 0] + 1,
}  # fmt: skip

BROADCAST = {
    "row": lambda a, b, c: a + b, "col": lambda a, b, c: a * c, "outer": lambda a, b, c: b.unsqueeze(-1) * c.view(1, 1, -1)[..., :4],
    "three_way": lambda a, b, c: torch.where(a > b, c, b), "scalar_tensor": lambda a, b, c: a * c.sum(),
    "reduce_broadcast": lambda a, b, c: a - a.mean(-1, keepdim=True) * b,
}  # fmt: skip


def test_views():
    check_cases(VIEWS, torch.randn(2, 3, 20))


def test_broadcasting():
    check_cases(BROADCAST, torch.randn(3, 4, 5), torch.randn(5), torch.randn(3, 4, 1))


def test_non_contiguous_inputs():
    base = torch.randn(8, 12)
    x = base[::2, 1::3]  # strided rows and columns
    y = torch.randn(12, 8).t()  # transposed
    cases = {"strided": lambda x, y: x * 2 + 1, "transposed": lambda x, y: y.exp(), "mixed": lambda x, y: y[:4, :4] + x,
             "reduce_strided": lambda x, y: x.sum(1), "reduce_transposed": lambda x, y: y.softmax(-1),
             "expand_input": lambda x, y: x[:, :1].expand(4, 4) * y[:4, :4]}  # fmt: skip
    check_cases(cases, x, y)


def test_expanded_and_offset_inputs():
    x = torch.randn(5).expand(3, 5)
    y = torch.randn(20)[3:13].view(2, 5)
    check_cases({"expanded": lambda x, y: x * 2, "offset": lambda x, y: y + 1, "both": lambda x, y: x[:2] - y}, x, y)


def test_zero_size_inputs():
    cases = {"pointwise": lambda x, y: x + 1, "sum_0": lambda x, y: x.sum(0), "sum_1": lambda x, y: x.sum(1),
             "mean_keep": lambda x, y: y.sum(-1, keepdim=True), "view": lambda x, y: x.view(4, 0).t() * 2,
             "broadcast": lambda x, y: x * y.sum(1)[:1].unsqueeze(1)}  # fmt: skip
    check_cases(cases, torch.randn(0, 4), torch.randn(3, 0))


def test_scalar_tensors():
    cases = {"mul": lambda a, b: a * b, "sum": lambda a, b: a.sum() + b, "where": lambda a, b: torch.where(a > b, a, b),
             "unsqueeze": lambda a, b: a.unsqueeze(0).expand(3) * b}  # fmt: skip
    check_cases(cases, torch.tensor(1.5), torch.tensor(-2.0))


def test_a_reshape_of_a_reshape_reads_memory_in_order():
    # [4, 64, 512] read as [256, 512] (GPT-2's MLP input): the index must collapse to the flat offset (no division left),
    # so the loop vectorises; the tanh form of GELU uses x**3, rendered as a product like eager's pow.
    def gelu_tanh(x):
        y = x.view(256, 512)
        z = 0.5 * y * (1.0 + torch.tanh(0.7978845608028654 * (y + 0.044715 * torch.pow(y, 3.0))))
        return (z * y.pow(2),)

    c = check(gelu_tanh, torch.randn(4, 64, 512))
    source = compiled_graphs(c)[0].kernel_source
    body = source[source.index("void kernel0") :]
    assert " / " not in body and "powf" not in body


def test_a_contiguous_view_of_an_extern_result_reaches_the_next_extern_without_a_copy():
    # Attention's output is laid out (batch, seq, heads, dim) under its (batch, heads, seq, dim) shape, so the usual
    # transpose(1, 2).reshape(...) is a view (BERT, GPT-2). Its index, (128*x0 + x1) // 64 % 2 for the head and so
    # on, must simplify to the flat offset so the projection reads the buffer itself rather than a copy.
    def attention_projection(q, k, v, w):
        q, k, v = (t.view(4, 64, 2, 64).transpose(1, 2) for t in (q, k, v))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        return (out.transpose(1, 2).reshape(256, 128) @ w,)

    q, k, v = (torch.randn(4, 64, 128) for _ in range(3))
    c = check(attention_projection, q, k, v, torch.randn(128, 32), atol=1e-5, rtol=1e-5)
    assert compiled_graphs(c)[0].info["kernels"] == 0
