"""The math functions the C++ kernels call give one result per input in vector loops, their remainders and
scalar code alike (glibc's scalar libm and its libmvec variants round about half of all ``expf`` results
differently)."""

from __future__ import annotations

import ctypes
import re
import subprocess

import pytest
import torch
from ilite_helpers import compiled

from dynajit.inductor_lite._build import start_library
from dynajit.inductor_lite._compile import _has_libmvec
from dynajit.inductor_lite._config import config
from dynajit.inductor_lite._uniform_math import load_uniform_math, uniform_math_source

pytestmark = pytest.mark.skipif(not _has_libmvec(), reason="no libmvec: every loop calls the scalar libm")

_CASES = {  # torch function, its C name, inputs in its domain
    "exp": (torch.exp, "exp", lambda x: x * 10),
    "log1p": (torch.log1p, "log1p", lambda x: x.abs() * 5),
    "sin": (torch.sin, "sin", lambda x: x * 20),
    "tanh": (torch.tanh, "tanh", lambda x: x * 3),
    "acosh": (torch.acosh, "acosh", lambda x: x.abs() + 1),
}


@pytest.mark.parametrize("name", list(_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_vectorised_kernel_and_the_scalar_function_agree_bit_for_bit(name, dtype):
    fn, c_name, domain = _CASES[name]
    x = domain(torch.randn(1003, generator=torch.Generator().manual_seed(0), dtype=dtype))
    (vectorised,) = compiled(lambda t: (fn(t),), x)(x)
    lib = load_uniform_math(config.cxx, config.cxx_flags, config.cache_dir)
    scalar = getattr(lib, f"dj_m_{c_name}{'f' if dtype == torch.float32 else ''}")
    ctype = ctypes.c_float if dtype == torch.float32 else ctypes.c_double
    scalar.argtypes, scalar.restype = [ctype], ctype
    one_by_one = torch.tensor([scalar(v) for v in x.tolist()], dtype=dtype)
    assert torch.equal(vectorised, one_by_one)
    torch.testing.assert_close(vectorised, fn(x))  # and eager's values, up to rounding


def test_every_simd_variant_is_defined_for_every_function():
    source = uniform_math_source()
    for isa, lanes in (("b", 4), ("c", 8), ("d", 8), ("e", 16)):
        assert f"_ZGV{isa}N{lanes}v_dj_m_expf(" in source
        assert f"_ZGV{isa}N{lanes // 2}vv_dj_m_pow(" in source


def test_a_loop_with_a_select_beside_a_math_call_calls_the_vector_variant(monkeypatch):
    # relu's select beside sigmoid's exp: g++ kept the branch, and the scalar call in it, until the functions
    # were declared const (pointwise_chain ran 8x slower than vectorised).
    from dynajit.inductor_lite import _compile

    built = []

    def recording(*args, **kwargs):
        future, key = start_library(*args, **kwargs)
        built.append(future)
        return future, key

    monkeypatch.setattr(_compile, "start_library", recording)
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    (out,) = compiled(lambda t: (torch.sigmoid(torch.relu(t) * t + 1),), x)(x)
    torch.testing.assert_close(out, torch.sigmoid(torch.relu(x) * x + 1))
    assert built, "no kernel library was built"
    symbols = subprocess.run(
        ["nm", "-D", "--undefined-only", built[0].result()._name], capture_output=True, text=True, check=True
    ).stdout
    assert re.search(r"_ZGV[bcde]N\d+v_dj_m_expf", symbols), symbols


def test_the_canonical_variant_is_the_widest_the_compiler_targets():
    # On an AVX-512 machine g++ vectorises at 16 floats; through AVX2's 8-lane variant each call split its lanes
    # into halves and back, which made a 1024x1024 softmax kernel 2.4x slower.
    macros = subprocess.run(
        [config.cxx, *config.cxx_flags.split(), "-dM", "-E", "-x", "c++", "-"],
        input="",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    widest = next(isa for isa, macro in (("e", "__AVX512F__"), ("d", "__AVX2__"), ("b", "")) if macro in macros)
    lib = load_uniform_math(config.cxx, config.cxx_flags, config.cache_dir)
    called = subprocess.run(["nm", "-D", "--undefined-only", lib._name], capture_output=True, text=True, check=True)
    libmvec = set(re.findall(r"_ZGV([bcde])N\d+v+_\w+", called.stdout))
    assert libmvec == {widest}, (widest, libmvec)
