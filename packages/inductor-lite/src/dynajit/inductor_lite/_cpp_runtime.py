"""The C++ every generated translation unit is built from: math declarations, the prelude, the op table.

``math_declarations`` declares the C math functions the kernels call (with glibc libmvec's SIMD
variants where available, so loops calling them vectorise); ``PRELUDE`` holds the inline helpers
(integer and float division semantics, bfloat16 rounding, erf and GELU); ``OPS`` maps each IR op
to its C++ template.
"""

from __future__ import annotations

from dynajit.inductor_lite._uniform_math import UNIFORM_MATH, UNIFORM_MATH2, uniform_math_declarations

__all__ = ["OPS", "PRELUDE", "SMALL_POWERS", "math_declarations"]

# <cmath> would triple a small kernel's build time (about 0.1 s of header parsing): the math the
# kernels need is spelt with g++ builtins instead, overloaded like std:: (an integer argument is
# computed in double). <limits> and <type_traits> cost another 0.02 s per library: the two traits
# and the infinities the kernels use are written here.
PRELUDE = r"""
#include <cstdint>
#define DJ_INLINE static inline __attribute__((always_inline))
// Each kernel is also callable from Python as a METH_FASTCALL function (DJ_PY(name), see python_entry): the
// interpreter's own calling convention, without ctypes' argument conversion, which cost four times as much per
// call. The few C API functions it needs are declared here: <Python.h> would add its parsing to every build.
typedef struct _object PyObject;
extern "C" {
void* PyLong_AsVoidPtr(PyObject*);
long long PyLong_AsLongLong(PyObject*);
PyObject* PyErr_Occurred(void);
void* PyEval_SaveThread(void);
void PyEval_RestoreThread(void*);
void Py_IncRef(PyObject*);
void PyErr_SetString(PyObject*, const char*);
PyObject* PyErr_Format(PyObject*, const char*, ...);
extern PyObject* PyExc_TypeError;
extern PyObject* PyExc_IndexError;
extern PyObject* PyExc_RuntimeError;
extern char _Py_NoneStruct;
}
#define DJ_PY(name) dj_py_##name
DJ_INLINE PyObject* dj_py_none() { PyObject* none = (PyObject*)&_Py_NoneStruct; Py_IncRef(none); return none; }
template <typename T> struct dj_is_fp { static constexpr bool value = false; };
template <> struct dj_is_fp<float> { static constexpr bool value = true; };
template <> struct dj_is_fp<double> { static constexpr bool value = true; };
template <> struct dj_is_fp<_Float16> { static constexpr bool value = true; };
template <typename T> struct dj_is_bool { static constexpr bool value = false; };
template <> struct dj_is_bool<bool> { static constexpr bool value = true; };
template <typename T> DJ_INLINE T dj_inf() { if constexpr (dj_is_fp<T>::value) { return (T)__builtin_inf(); } else { return T(0); } }
template <typename T> DJ_INLINE T dj_nan() { if constexpr (dj_is_fp<T>::value) { return (T)__builtin_nan(""); } else { return T(0); } }
#define DJ_MATH1(name) \
  DJ_INLINE float djm_##name(float x) { return __builtin_##name##f(x); } \
  DJ_INLINE double djm_##name(double x) { return __builtin_##name(x); } \
  template <typename T> DJ_INLINE auto djm_##name(T x) { return djm_##name((double)x); }
#define DJ_MATH2(name) \
  DJ_INLINE float djm_##name(float a, float b) { return __builtin_##name##f(a, b); } \
  DJ_INLINE double djm_##name(double a, double b) { return __builtin_##name(a, b); } \
  template <typename A, typename B> DJ_INLINE double djm_##name(A a, B b) { return __builtin_##name((double)a, (double)b); }
DJ_MATH1(sqrt) DJ_MATH1(floor) DJ_MATH1(ceil) DJ_MATH1(trunc) DJ_MATH1(nearbyint) DJ_MATH1(lgamma)
DJ_MATH2(fmod) DJ_MATH2(pow) DJ_MATH2(copysign)
template <typename T> DJ_INLINE bool djm_isinf(T x) { return __builtin_isinf((double)x); }
DJ_INLINE bool djm_isinf(float x) { return __builtin_isinf(x); }
template <typename T> DJ_INLINE bool djm_signbit(T x) { return __builtin_signbit((double)x); }
DJ_INLINE bool djm_signbit(float x) { return __builtin_signbit(x); }
DJ_INLINE int64_t dj_imax(int64_t a, int64_t b) { return a > b ? a : b; }
// An index read from a tensor (an embedding's row) is read through dj_in_range: one out of range reads row 0, so no
// access leaves the tensor, and the least and largest index each load site read (min and max reductions of every
// loop, which still vectorise) tell the Python entry after the loops whether to raise eager's error, with dj_fault_t.
struct dj_fault_t { int64_t site, value, size; };
DJ_INLINE int64_t dj_in_range(int64_t v, int64_t n) { return (uint64_t)v < (uint64_t)n ? v : 0; }
DJ_INLINE int64_t dj_imin(int64_t a, int64_t b) { return a < b ? a : b; }
template <typename T> DJ_INLINE T dj_max(T a, T b) { return ((a != a) | (a > b)) ? a : b; }
template <typename T> DJ_INLINE T dj_min(T a, T b) { return ((a != a) | (a < b)) ? a : b; }
template <typename T> DJ_INLINE T dj_floordiv(T a, T b) {
  if constexpr (dj_is_fp<T>::value) {
    // eager's (and Python's) floor division: from the exact fmod, not floor(a / b), which rounds 1 // 0.1 to
    // 10 and inf // 2.5 to inf (eager: 9 and NaN)
    if (b == 0) { return a / b; }
    T mod = djm_fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0))) { div -= T(1); }
    if (div == 0) { return djm_copysign(T(0), a / b); }
    T floored = djm_floor(div);
    return div - floored > T(0.5) ? floored + T(1) : floored;
  } else { T q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
}
template <typename T> DJ_INLINE T dj_truncdiv(T a, T b) {
  if constexpr (dj_is_fp<T>::value) { return djm_trunc(a / b); } else { return a / b; }
}
template <typename T> DJ_INLINE T dj_remainder(T a, T b) {
  if constexpr (dj_is_fp<T>::value) {
    T r = djm_fmod(a, b); return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
  } else { T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
}
template <typename T> DJ_INLINE T dj_fmod(T a, T b) {
  if constexpr (dj_is_fp<T>::value) { return djm_fmod(a, b); } else { return a % b; }
}
template <typename T> DJ_INLINE T dj_pow(T a, T b) {
  if constexpr (dj_is_fp<T>::value) { return djm_pow(a, b); }
  else {
    // eager's integer power of a negative exponent: 1 and -1 keep their magnitude, every other base gives 0
    if (b < 0) { return a == 1 ? T(1) : a == T(-1) ? T((b & 1) ? -1 : 1) : T(0); }
    T r = 1; while (b) { if (b & 1) r *= a; a *= a; b >>= 1; } return r;
  }
}
// Eager's sign of NaN is 0 (both comparisons are false), not NaN.
template <typename T> DJ_INLINE T dj_sign(T a) { return (T)((a > T(0)) - (a < T(0))); }
// 0 - a, not -a: the absolute value of -0.0 is 0.0 (as eager's), and NaN passes as it is
template <typename T> DJ_INLINE T dj_abs(T a) { return a <= T(0) ? T(T(0) - a) : a; }
template <typename T> DJ_INLINE T dj_not(T a) { if constexpr (dj_is_bool<T>::value) { return !a; } else { return ~a; } }
// Eager's shifts by a count past the type's width, or a negative one: everything shifted out (the sign kept by a
// right shift), where C++'s shift is undefined and x86 takes the count modulo 32 or 64. The top bit of b is its sign.
template <typename T> DJ_INLINE bool dj_shift_out(T b, int64_t width) {
  return ((b >> (sizeof(T) * 8 - 1)) & 1) || (int64_t)b >= width;
}
template <typename T> DJ_INLINE T dj_lshift(T a, T b) {
  return dj_shift_out(b, sizeof(T) * 8) ? T(0) : T((uint64_t)a << (int64_t)b);
}
template <typename T> DJ_INLINE T dj_rshift(T a, T b) {
  return dj_shift_out(b, sizeof(T) * 8 - (T(-1) < T(0))) ? (a < T(0) ? T(-1) : T(0)) : T(a >> b);
}
DJ_INLINE float dj_bf16_to_float(uint16_t v) { uint32_t u = ((uint32_t)v) << 16; float f; __builtin_memcpy(&f, &u, 4); return f; }
DJ_INLINE uint16_t dj_float_to_bf16(float f) {
  uint32_t u; __builtin_memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  u += 0x7fff + ((u >> 16) & 1); return (uint16_t)(u >> 16);
}
DJ_INLINE float dj_round_bf16(float f) { return dj_bf16_to_float(dj_float_to_bf16(f)); }
DJ_INLINE float dj_round_f16(float f) { return (float)(_Float16)f; }
// A float to a 32- or 64-bit integer as x86 converts it, as eager's kernels do (cvttss2si, vcvttps2qq): NaN and
// values out of the integer's range give its lowest value. C++ leaves those undefined, and g++'s code gave the
// highest for inf. The bound (2^31 or 2^63) is exact in float and double.
template <typename I, typename F> DJ_INLINE I dj_float_to_int(F x) {
  const I lowest = (I)((uint64_t)1 << (sizeof(I) * 8 - 1));
  const F bound = -(F)lowest;
  return (x >= -bound && x < bound) ? static_cast<I>(x) : lowest;
}
// exp(-z) for z >= 0 inline (no libmvec call to spill registers around): reduction by ln 2 in two parts, a
// degree-7 polynomial (1 ulp), and 2^k built in the exponent bits. Past z = 87 the result would leave float's
// normal range, so z is clamped there: erf only subtracts it from 1.
DJ_INLINE float dj_exp_neg(float z) {
  z = z < 87.0f ? z : 87.0f;
  float k = __builtin_rintf(z * -1.44269504088896341f);
  float r = __builtin_fmaf(k, -0.693359375f, -z);
  r = __builtin_fmaf(k, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f); p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f); p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p, r * r, r) + 1.0f;
  uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
  float scale; __builtin_memcpy(&scale, &bits, 4);
  return p * scale;
}
// Abramowitz & Stegun 7.1.26 for erf(a), a >= 0, z = a * a: 1 - t P(t) exp(-z), at most 1.5e-7 absolute error.
// The fused multiply-adds are written out: kernels are built without contraction (-ffp-contract=off).
DJ_INLINE float dj_erf_as(float a, float z) {
  float t = 1.0f / __builtin_fmaf(0.3275911f, a, 1.0f);
  float q = __builtin_fmaf(t, 1.061405429f, -1.453152027f);
  q = __builtin_fmaf(t, q, 1.421413741f); q = __builtin_fmaf(t, q, -0.284496736f);
  q = __builtin_fmaf(t, q, 0.254829592f);
  return __builtin_fmaf(-(t * q), dj_exp_neg(z), 1.0f);
}
// float erf without a library call, so the loop vectorises with only expf from libmvec (about 1.5x
// faster than libmvec's erff): the odd Taylor series below 1 (exact to float rounding), A&S above it
// (at most 2.2e-7 relative error there, under 2 ulp).
DJ_INLINE float dj_erf(float x) {
  float a = __builtin_fabsf(x), z = x * x;
  float s = 1.480719282e-08f;
  s = __builtin_fmaf(s, z, -1.636584469e-07f); s = __builtin_fmaf(s, z, 1.646211437e-06f);
  s = __builtin_fmaf(s, z, -1.492565036e-05f); s = __builtin_fmaf(s, z, 0.0001205533298f);
  s = __builtin_fmaf(s, z, -0.0008548327023f); s = __builtin_fmaf(s, z, 0.005223977625f);
  s = __builtin_fmaf(s, z, -0.02686617065f); s = __builtin_fmaf(s, z, 0.1128379167f);
  s = __builtin_fmaf(s, z, -0.376126389f); s = __builtin_fmaf(s, z, 1.128379167f);
  return a < 1.0f ? x * s : __builtin_copysignf(dj_erf_as(a, z), x);
}
DJ_INLINE double dj_erf(double x) { return dj_m_erf(x); }
// Exact GELU with A&S for erf everywhere, the approximation eager's vectorised CPU kernel also uses: GELU adds erf
// to 1, which absorbs the relative accuracy the series buys near 0, so the loop skips it (about 1.2x faster).
DJ_INLINE float dj_gelu(float x) {
  float y = x * 0.70710678118654752f;
  return 0.5f * x * (1.0f + __builtin_copysignf(dj_erf_as(__builtin_fabsf(y), y * y), y));
}
DJ_INLINE double dj_gelu(double x) { return 0.5 * x * (1.0 + dj_m_erf(x * 0.70710678118654752)); }
"""

# op -> C++ template over arguments {0}, {1}, {2} and the compute type {T}.
OPS = {
    "add": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "truediv": "({0} / {1})",
    "floordiv": "dj_floordiv<{T}>({0}, {1})",
    "truncdiv": "dj_truncdiv<{T}>({0}, {1})",
    "remainder": "dj_remainder<{T}>({0}, {1})",
    "fmod": "dj_fmod<{T}>({0}, {1})",
    "pow": "dj_pow<{T}>({0}, {1})",
    "copysign": "djm_copysign({0}, {1})",
    "maximum": "dj_max<{T}>({0}, {1})",
    "minimum": "dj_min<{T}>({0}, {1})",
    # A NaN bound makes a NaN (eager's clamp propagates it, from a tensor or a number); a NaN input stays one.
    "clamp_min": "(({0} < {1}) | ({1} != {1}) ? {1} : {0})",
    "clamp_max": "(({0} > {1}) | ({1} != {1}) ? {1} : {0})",
    "neg": "(-{0})",
    "abs": "dj_abs<{T}>({0})",
    "reciprocal": "({T}(1) / {0})",
    "rsqrt": "({T}(1) / djm_sqrt({0}))",
    "sigmoid": "({T}(1) / ({T}(1) + dj_m_exp{F}(-{0})))",
    "relu": "({0} < {T}(0) ? {T}(0) : {0})",
    "sign": "dj_sign<{T}>({0})",
    "round": "djm_nearbyint({0})",
    "frac": "({0} - djm_trunc({0}))",
    "bitwise_not": "dj_not<{T}>({0})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "logical_and": "({0} && {1})",
    "logical_or": "({0} || {1})",
    "logical_xor": "(bool({0}) != bool({1}))",
    "logical_not": "(!{0})",
    "bitwise_and": "({0} & {1})",
    "bitwise_or": "({0} | {1})",
    "bitwise_xor": "({0} ^ {1})",
    "lshift": "dj_lshift<{T}>({0}, {1})",
    "rshift": "dj_rshift<{T}>({0}, {1})",
    "isnan": "({0} != {0})",
    "isinf": "djm_isinf({0})",
    "signbit": "djm_signbit({0})",
    "where": "({0} ? {1} : {2})",
}
for _fn in "sqrt floor ceil trunc lgamma".split():
    OPS[_fn] = f"djm_{_fn}({{0}})"
# Math with vector variants in glibc's libmvec: called as dj_m_<name> (see _uniform_math) so g++ can vectorise the
# loop, and every loop computes one value per input.
SMALL_POWERS = {1.0: "({0})", 2.0: "({0} * {0})", 3.0: "({0} * {0} * {0})"}
for _fn in UNIFORM_MATH:
    OPS[_fn] = f"dj_m_{_fn}{{F}}({{0}})"
OPS["atan2"] = "dj_m_atan2{F}({0}, {1})"
OPS["hypot"] = "dj_m_hypot{F}({0}, {1})"
OPS["erf"] = "dj_erf({0})"
OPS["gelu"] = "dj_gelu({0})"


def math_declarations(vectorised: bool) -> str:
    """Declare the ``dj_m_`` math functions the kernels call.

    Vectorised, they are the uniform functions of :mod:`._uniform_math` (declared with SIMD variants, as glibc's
    own header declares libm's under fast-math, and loaded before the kernels); without libmvec they are the
    scalar C functions, which every loop then calls.
    """
    if vectorised:
        return uniform_math_declarations()
    lines = ['extern "C" {']
    for fn in UNIFORM_MATH:
        lines += [f"float {fn}f(float);", f"double {fn}(double);"]
    for fn in UNIFORM_MATH2:
        lines += [f"float {fn}f(float, float);", f"double {fn}(double, double);"]
    lines.append("}")
    for fn in UNIFORM_MATH:
        for suffix, t in (("f", "float"), ("", "double")):
            lines.append(f"static inline {t} dj_m_{fn}{suffix}({t} a) {{ return {fn}{suffix}(a); }}")
    for fn in UNIFORM_MATH2:
        for suffix, t in (("f", "float"), ("", "double")):
            lines.append(f"static inline {t} dj_m_{fn}{suffix}({t} a, {t} b) {{ return {fn}{suffix}(a, b); }}")
    return "\n".join(lines)
