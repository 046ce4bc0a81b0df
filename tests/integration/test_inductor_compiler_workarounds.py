"""Kernels g++ 12 miscompiled or its toolchain refused: each built with inductor-lite's default flags runs as eager
does."""

import warnings

import pytest
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


def _cpu_has_fp16_vectors() -> bool:
    try:
        with open("/proc/cpuinfo") as info:
            return "avx512_fp16" in info.read()
    except OSError:
        return False


@pytest.mark.skipif(not _cpu_has_fp16_vectors(), reason="the CPU has no AVX512-FP16: g++ emits no vmovsh")
def test_a_float16_kernel_builds_where_the_assembler_rejects_masked_fp16_moves(tmp_path):
    # g++ 12 -march=native emitted masked vmovsh for this float16 kernel, which binutils 2.40's assembler
    # rejects: the build failed and the graph ran its aten ops eagerly, with a warning (fuzz class a256:99).
    def fn(x0, x1):
        return torch.maximum(x1, x0)

    x0, x1 = torch.randn(3, 3).to(torch.float16).mT, torch.randint(-4, 5, (1, 3))
    dynajit.compiler.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        compiled = dynajit.compiler.compile(fn, backend="inductor", options={"cache_dir": str(tmp_path)})
        actual = compiled(x0, x1)
    torch.testing.assert_close(actual, fn(x0, x1))
