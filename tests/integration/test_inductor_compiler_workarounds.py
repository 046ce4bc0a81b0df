"""Kernels g++ 12 miscompiled: each built with inductor-lite's default flags runs as eager does."""

import torch

import dynajit.compiler


def _write_through_a_view_then_convert(x0):
    t = x0
    v3 = x0 / t  # an integer's float is converted apart where the integer is 0: `t1 != 0 ? float(t1) : 0`
    v4 = x0[:, :]
    v4[:, 1:] += 1  # the loop's first element is not written by the slice, and is stored apart
    pad = torch.nn.functional.pad(v3, (1, 2))
    v11 = v3**2
    v12 = t.to(torch.float32)
    return t, v11, pad, v12


def test_a_short_loops_first_element_is_written_when_its_value_and_index_are_zero():
    # With -march=native on AVX-512, g++ 12's jump threading made three masked stores of the written input's
    # new value; its vectoriser dropped the one for index 0 and value 0, so that element was left as the
    # buffer's old memory (a heap pointer): fuzz program a68-0:140. Built many times over, the unwritten
    # element would rarely hold the 0 it should.
    compiled = dynajit.compiler.compile(_write_through_a_view_then_convert, backend="inductor", fullgraph=True)
    for _ in range(40):
        eager_in, compiled_in = torch.tensor([[0, 1, -4, 1]]), torch.tensor([[0, 1, -4, 1]])
        expected = _write_through_a_view_then_convert(eager_in)
        actual = compiled(compiled_in)
        torch.testing.assert_close(actual, expected, equal_nan=True)
        torch.testing.assert_close(compiled_in, eager_in)
        assert actual[0] is compiled_in
