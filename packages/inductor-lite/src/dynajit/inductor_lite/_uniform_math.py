"""One result per input for every vectorised math function, whichever loop computes it.

g++ vectorises a loop calling ``expf`` with glibc libmvec's SIMD variant and runs its remainder, and every
loop it does not vectorise, with the scalar ``expf``. The two round differently (about half of all
``expf`` results differ by an ulp, as do libmvec's SSE and AVX2 variants), so the same expression computed
in two loops of a graph, or recomputed by the backward, could give two values. A comparison of the two
(``y == y.amax(-1, keepdim=True)``, amax's gradient) then finds no element equal to the maximum, where
eager's kernels, which run their remainders through the same vector functions, always find one.

The kernels call ``dj_m_<name>`` instead, declared with SIMD variants. This module writes and loads (into
the process's global symbol scope, before any kernel library) a small library that defines the scalar
function and every SIMD variant g++ may call through a single libmvec variant: the widest the machine has
(AVX-512's, AVX2's, else SSE's). The scalar and narrower forms broadcast their lanes into it, any wider one
splits into it.
"""

from __future__ import annotations

import ctypes
import threading

from dynajit.inductor_lite._build import CacheStats, cache_dir, load_library

__all__ = ["UNIFORM_MATH", "UNIFORM_MATH2", "load_uniform_math", "uniform_math_declarations", "uniform_math_source"]

# The libmvec functions the kernels call: one argument, then two.
UNIFORM_MATH = (
    "exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh erf erfc".split()
)
UNIFORM_MATH2 = ("pow", "atan2", "hypot")

# x86-64 vector ABI: the ISA letter of each SIMD variant, the macro that makes its registers usable, and its
# lanes for float (double has half as many).
_VARIANTS = (("b", None, 4), ("c", "__AVX__", 8), ("d", "__AVX__", 8), ("e", "__AVX512F__", 16))
_TYPES = (("f", "float", 1), ("", "double", 2))

_HEADER = r"""
// Apply the canonical variant CN (N lanes) to the M lanes of a (and b): lanes past M repeat the first ones.
template <int M, int N, typename VM, typename VN, typename F>
static inline VM dj_chunks(VM a, VM b, F canonical) {
  VM r;
  for (int i = 0; i < M; i += N) {
    VN ca, cb;
    for (int j = 0; j < N; j++) { ca[j] = a[(i + j) % M]; cb[j] = b[(i + j) % M]; }
    VN o = canonical(ca, cb);
    for (int j = 0; j < N && i + j < M; j++) r[i + j] = o[j];
  }
  return r;
}
"""


def _vector(ctype: str, lanes: int) -> str:
    return f"dj_v{ctype[0]}{lanes}"


def _functions(canon: str, canon_lanes: dict[str, int]) -> list[str]:
    """The scalar function and the SIMD variants of every function, for the canonical ISA ``canon``."""
    lines = []
    for suffix, ctype, divisor in _TYPES:
        n = canon_lanes[ctype]
        vn = _vector(ctype, n)
        for name, arity in [(fn, 1) for fn in UNIFORM_MATH] + [(fn, 2) for fn in UNIFORM_MATH2]:
            libm = f"{name}{suffix}"
            target = f"_ZGV{canon}N{n}{'v' * arity}_{libm}"
            params = ", ".join([vn] * arity)
            lines.append(f'extern "C" {vn} {target}({params});')
            call = f"{target}(a)" if arity == 1 else f"{target}(a, b)"
            canonical = f"[]({vn} a, {vn} b) {{ (void)b; return {call}; }}"
            scalar_params = ", ".join(f"{ctype} {p}" for p in "ab"[:arity])
            broadcast = "{" + ", ".join(["a"] * n) + "}"
            second = "{" + ", ".join(["b"] * n) + "}" if arity == 2 else "{}"
            lines.append(
                f'extern "C" {ctype} dj_m_{libm}({scalar_params}) {{ {vn} va = {broadcast}, vb = {second}; '
                f"return ({canonical})(va, vb)[0]; }}"
            )
            for isa, guard, float_lanes in _VARIANTS:
                m = float_lanes // divisor
                vm = _vector(ctype, m)
                variant = f"_ZGV{isa}N{m}{'v' * arity}_dj_m_{libm}"
                vparams = ", ".join(f"{vm} {p}" for p in "ab"[:arity])
                other = "b" if arity == 2 else "a"
                body = f"return dj_chunks<{m}, {n}, {vm}, {vn}>(a, {other}, {canonical});"
                text = f'extern "C" {vm} {variant}({vparams}) {{ {body} }}'
                lines.append(f"#if defined({guard})\n{text}\n#endif" if guard else text)
    return lines


def uniform_math_source() -> str:
    """The C++ of the library: the widest libmvec variant the compiler targets is canonical (AVX-512's, else
    AVX2's, else SSE's). A loop g++ vectorises at the widest width then calls it once per vector; through a
    narrower canonical each call split its lanes into halves and back, which made a softmax 2.4x slower."""
    types = []
    for _, ctype, divisor in _TYPES:
        for lanes in sorted({float_lanes // divisor for _, _, float_lanes in _VARIANTS}):
            size = lanes * (4 if ctype == "float" else 8)
            types.append(f"typedef {ctype} {_vector(ctype, lanes)} __attribute__((vector_size({size})));")
    avx512 = _functions("e", {"float": 16, "double": 8})
    avx2 = _functions("d", {"float": 8, "double": 4})
    sse = _functions("b", {"float": 4, "double": 2})
    return (
        "\n".join(
            [
                *types,
                _HEADER,
                "#if defined(__AVX512F__)",
                *avx512,
                "#elif defined(__AVX2__)",
                *avx2,
                "#else",
                *sse,
                "#endif",
            ]
        )
        + "\n"
    )


def uniform_math_declarations() -> str:
    """What a kernel translation unit declares: every ``dj_m_`` function, with its SIMD variants."""
    # ``const`` (a function of its arguments only, as libmvec's are: they never set errno) lets g++ vectorise a
    # loop that also holds a select (``relu``): without it if-conversion keeps the branch around the call.
    simd = '__attribute__((simd("notinbranch"), const)) '
    lines = ['extern "C" {']
    for suffix, ctype, _ in _TYPES:
        lines += [f"{simd}{ctype} dj_m_{fn}{suffix}({ctype});" for fn in UNIFORM_MATH]
        lines += [f"{simd}{ctype} dj_m_{fn}{suffix}({ctype}, {ctype});" for fn in UNIFORM_MATH2]
    lines.append("}")
    return "\n".join(lines)


runtime_stats = CacheStats()
_loaded: dict[tuple[str, str, str], ctypes.CDLL] = {}
_lock = threading.Lock()


def load_uniform_math(cxx: str, flags: str, directory: str = "") -> ctypes.CDLL:
    """Build (or find in the kernel cache) and load the library, with its symbols global, once per process."""
    key = (cxx, flags, directory)
    with _lock:
        lib = _loaded.get(key)
        if lib is None:
            # Kept and counted apart from the kernel libraries, in the cache's runtime folder.
            runtime = str(cache_dir(directory) / "runtime")
            local, _ = load_library(uniform_math_source(), cxx, flags, runtime, runtime_stats)
            # Opened again with RTLD_GLOBAL: kernel libraries, opened later, resolve dj_m_* against it.
            lib = _loaded[key] = ctypes.CDLL(local._name, mode=ctypes.RTLD_GLOBAL)
        return lib
