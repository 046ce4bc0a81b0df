"""Runs one generated program eagerly and compiled, call by call, and reports how the compiled runs differ.

Each backend gets its own copy of the program (a fresh ``exec``, so fresh
code objects and caches) and one compiled function used for every call, so
later calls exercise the cache, recompiles and dynamic shapes. Every call
runs on fresh inputs built by the program's ``make_args``. Compared: the
outputs' structure, values (dtype-aware tolerances, NaNs equal), dtypes,
shapes, strides where eager's output is a view of an input, dense or expanded (and not empty), which
outputs alias which inputs, the inputs afterwards (values and metadata),
exception types, the modules' state, and, for arguments and parameters requiring
grad, the gradients a backward of the outputs leaves on them (a difference of values or gradients no larger
than a few times eager's own float32 error, against eager in float64, is rounding). A fallback to
eager (a ``RuntimeWarning`` saying the frame or graph runs eagerly, an
``eager``/``error`` frame record, a strict-mode error) is a failure too.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import linecache
import os
import re
import signal
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree

import dynajit.capture
import dynajit.compiler

from .program import Program

BACKENDS = ("inductor", "aot_eager")
TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class Failure:
    """One way a compiled run differed from eager.

    ``kind`` is the check that failed (``value``, ``dtype``, ``shape``, ``stride``, ``alias``,
    ``structure``, ``input_value``, ``input_metadata``, ``raised`` (compiled raised, eager did not),
    ``not_raised``, ``exception_type``, ``fallback``, ``cache_limit``, ``timeout``, ``grad`` (the leaves'
    gradients after the backward differ), ``backward_raised``, ``backward_not_raised``,
    ``backward_exception_type``, ``module_state``, ``process_state`` (grad mode, inference mode, default dtype or
    the global generator left otherwise than eager leaves them)); ``exc`` the exception type involved, if any;
    ``detail`` a human-readable description.
    """

    backend: str
    call: int
    kind: str
    exc: str
    detail: str

    @property
    def signature(self) -> str:
        """What the shrinker keeps: the backend, the check and the exception type."""
        return f"{self.backend}:{self.kind}:{self.exc}"

    @property
    def failure_class(self) -> str:
        """A coarse class for grouping: the signature and the detail with numbers and names normalised."""
        return f"{self.kind}:{self.exc}:{normalise(self.detail)}"


def normalise(text: str) -> str:
    """The first line of a message with numbers, generated names and quoted values blanked out."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    # Quoted values are blanked, but not attribute and type names (they tell bugs apart).
    line = re.sub(r"'([^']*)'", lambda m: m.group(0) if re.fullmatch(r"[A-Za-z_]\w*", m.group(1)) else "'_'", line)
    line = re.sub(r"\b(v|r|f|lst|tup|d|p|q|inner|helper|x)\d+\b", "NAME", line)
    line = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line)
    line = re.sub(r"N(, N)+", "N...", line)  # sizes of any rank
    line = re.sub(r"<fuzz-[^>]*>", "FILE", line)
    return line[:120]


# Set by :func:`check` for a program that computes in bfloat16 or float16 anywhere: a float32 or float64 result
# then carries half-precision intermediates, rounded the same way by eager and compiled code but for a last
# bit here and there (a reduction's order), which the ops after it magnify.
_HALF_TOLERANCE: contextvars.ContextVar[dict[str, float] | None] = contextvars.ContextVar("half", default=None)
_HALF = {"bfloat16": {"rtol": 3e-2, "atol": 3e-2}, "float16": {"rtol": 4e-3, "atol": 4e-3}}


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    half = _HALF_TOLERANCE.get()
    if half is not None and dtype.is_floating_point:
        return half
    if dtype == torch.float64:
        # A float64 result may carry a float32 intermediate promoted into it (`torch.minimum(f64, f32)`), whose
        # last bit eager and a fused kernel may round apart: 1 float32 ulp is 6e-8 relative, summed over a few
        # dims it reaches 1e-6. Still far below float32's tolerance, so float64 computed in float32 shows.
        return {"rtol": 1e-5, "atol": 1e-5}
    if dtype.is_floating_point:
        return {"rtol": 2e-3, "atol": 2e-3}
    return {"rtol": 0.0, "atol": 0.0}


def _load(program_source: str, name: str) -> dict[str, Any]:
    """Execute the program's source as a fresh module (its lines registered for tracebacks)."""
    filename = f"<fuzz-{name}>"
    linecache.cache[filename] = (len(program_source), None, program_source.splitlines(True), filename)
    ns: dict[str, Any] = {"__name__": f"fuzzprog_{name}"}
    exec(compile(program_source, filename, "exec"), ns)
    return ns


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _input_index(t: torch.Tensor, args: list[Any]) -> int | None:
    """Which argument ``t`` shares memory with (None: no argument)."""
    if t.numel() == 0:
        return None  # empty tensors may share no memory at all; their aliasing is unobservable
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor) and a.untyped_storage().nbytes() and _storage(a) == _storage(t):
            return i
    return None


def _same_strides(expected: torch.Tensor, actual: torch.Tensor) -> bool:
    """Equal strides on every dim of two or more elements; an empty tensor's address nothing and are not compared
    (torch's meta kernels, whose layouts compiled graphs follow, lay empty pointwise results out contiguously
    where eager's TensorIterator keeps its input's dim order)."""
    if expected.numel() == 0:
        return True
    return all(
        size <= 1 or es == as_ for size, es, as_ in zip(expected.shape, expected.stride(), actual.stride(), strict=True)
    )


def compare_values(expected: Any, actual: Any, where: str) -> tuple[str, str] | None:
    """The first difference of values between two pytrees (``(kind, detail)``), or None."""
    e_leaves, e_spec = pytree.tree_flatten(expected)
    a_leaves, a_spec = pytree.tree_flatten(actual)
    if e_spec != a_spec:
        return "structure", f"{where}: eager returned {e_spec}, compiled {a_spec}"
    for i, (e, a) in enumerate(zip(e_leaves, a_leaves, strict=True)):
        at = f"{where}[{i}]"
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return "structure", f"{at}: eager {type(e).__name__}, compiled {type(a).__name__}"
        if not isinstance(e, torch.Tensor):
            if type(e) is not type(a):
                return "structure", f"{at}: eager {type(e).__name__} {e!r}, compiled {type(a).__name__} {a!r}"
            if isinstance(e, float):
                if not (
                    e == a or (e != e and a != a) or abs(e - a) <= _tolerance(torch.float32)["rtol"] * (1 + abs(e))
                ):
                    return "value", f"{at}: eager {e!r}, compiled {a!r}"
            elif e != a:
                return "value", f"{at}: eager {e!r}, compiled {a!r}"
            continue
        if e.dtype != a.dtype:
            return "dtype", f"{at}: eager {e.dtype}, compiled {a.dtype}"
        if e.shape != a.shape:
            return "shape", f"{at}: eager {tuple(e.shape)}, compiled {tuple(a.shape)}"
        try:
            # (values only: assert_close reads the history, which autograd refuses for a view made without
            # gradients whose base was written after; requires_grad is compared in compare_outputs)
            torch.testing.assert_close(a.detach(), e.detach(), equal_nan=True, **_tolerance(e.dtype))
        except AssertionError as error:
            return "value", f"{at}: {' '.join(str(error).split())[:300]}"
    return None


def compare_outputs(
    expected: Any, actual: Any, e_args: list[Any], a_args: list[Any], *, values: bool = True
) -> tuple[str, str] | None:
    """Values (unless ``values`` is false: they differ by rounding), then strides and aliasing of the outputs,
    then the inputs afterwards."""
    diff = compare_values(expected, actual, "output") if values else None
    if diff:
        return diff
    e_leaves, a_leaves = pytree.tree_leaves(expected), pytree.tree_leaves(actual)
    for i, (e, a) in enumerate(zip(e_leaves, a_leaves, strict=True)):
        if not isinstance(e, torch.Tensor):
            continue
        e_state, a_state = (e.requires_grad, e.is_inference()), (a.requires_grad, a.is_inference())
        if e_state != a_state:
            return "autograd", f"output[{i}] (requires_grad, is_inference): eager {e_state}, compiled {a_state}"
        e_alias, a_alias = _input_index(e, e_args), _input_index(a, a_args)
        if e_alias != a_alias:
            return "alias", f"output[{i}]: eager aliases input {e_alias}, compiled aliases input {a_alias}"
        expanded = any(stride == 0 and size > 1 for size, stride in zip(e.shape, e.stride()))
        if (e_alias is not None or e.is_contiguous() or expanded) and not _same_strides(e, a):
            return "stride", f"output[{i}] {tuple(e.shape)}: eager strides {e.stride()}, compiled {a.stride()}"
        if e_alias is not None and e.storage_offset() != a.storage_offset():
            return "stride", f"output[{i}]: eager storage offset {e.storage_offset()}, compiled {a.storage_offset()}"
    # The same objects: an in-place op's result is its tensor (``x.mul_(2) is x``), a value returned twice is one.
    e_objects, a_objects = _object_identities(e_leaves, e_args), _object_identities(a_leaves, a_args)
    if e_objects != a_objects:
        return (
            "identity",
            f"outputs as objects (an input's or an earlier output's): eager {e_objects}, compiled {a_objects}",
        )
    # Outputs aliasing each other (a view returned with its base) must alias the same way.
    e_groups = [_storage(t) if isinstance(t, torch.Tensor) and t.numel() else None for t in e_leaves]
    a_groups = [_storage(t) if isinstance(t, torch.Tensor) and t.numel() else None for t in a_leaves]
    for i in range(len(e_groups)):
        for j in range(i):
            if e_groups[i] is None or a_groups[i] is None or e_groups[j] is None or a_groups[j] is None:
                continue
            if (e_groups[i] == e_groups[j]) != (a_groups[i] == a_groups[j]):
                if e_groups[i] == e_groups[j]:
                    return "alias", f"outputs {j} and {i} share memory in eager, not in compiled"
                return "alias", f"outputs {j} and {i} share memory in compiled, not in eager"
    return compare_inputs(e_args, a_args)


def _object_identities(leaves: list[Any], args: list[Any]) -> list[tuple[str, int] | None]:
    """Per output tensor, the input or the earlier output it is (the same Python object), else None."""
    found: list[tuple[str, int] | None] = []
    for i, t in enumerate(leaves):
        same = None
        if isinstance(t, torch.Tensor):
            same = next((("input", k) for k, a in enumerate(args) if a is t), None)
            same = same or next((("output", j) for j in range(i) if leaves[j] is t), None)
        found.append(same)
    return found


def compare_inputs(e_args: list[Any], a_args: list[Any]) -> tuple[str, str] | None:
    """The arguments after the call: metadata (a t_() on an input) and values (in-place mutation)."""
    for i, (e, a) in enumerate(zip(e_args, a_args, strict=True)):
        if hasattr(e, "snapshot"):  # a State argument: its attributes, containers and boxes afterwards
            diff = compare_values(e.snapshot(), a.snapshot(), f"input {i}")
            if diff:
                return "input_value", diff[1]
            continue
        if not isinstance(e, torch.Tensor):
            continue
        same_offset = e.numel() == 0 or e.storage_offset() == a.storage_offset()
        if e.shape != a.shape or not _same_strides(e, a) or not same_offset:
            return "input_metadata", (
                f"input {i}: eager {tuple(e.shape)}/{e.stride()}, compiled {tuple(a.shape)}/{a.stride()}"
            )
        diff = compare_values(e, a, f"input {i}")
        if diff:
            return "input_value", diff[1]
    return None


class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def _deadline(seconds: int):
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def expire(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def _half_tolerance(tolerance: dict[str, float] | None) -> Iterator[None]:
    token = _HALF_TOLERANCE.set(tolerance)
    try:
        yield
    finally:
        _HALF_TOLERANCE.reset(token)


def _strict_patch():
    """Strict mode, where capture has it: a fallback then raises StrictModeError instead of running eagerly."""
    config = dynajit.capture.config
    names = getattr(type(config), "names", None)
    has_strict = "strict" in (names() if callable(names) else dir(config))
    if has_strict and hasattr(config, "patch"):
        return config.patch(strict=True)
    return contextlib.nullcontext()


def _call(fn: Any, args: list[Any], ns: dict[str, Any], call: int) -> tuple[Any, BaseException | None, Any]:
    """``fn(*args)`` in the grad mode the program makes ``call`` in (``ambient_modes``), the error it raised, and
    the process state it left (see :func:`process_state`), the global generator seeded alike before it."""
    torch.manual_seed(call)
    with ns["ambient"](call) if "ambient" in ns else torch.enable_grad():
        try:
            out, error = fn(*args), None
        except _Timeout:
            raise
        except Exception as raised:
            out, error = None, raised
        return out, error, process_state()


_STATE_PARTS = ("grad mode", "inference mode", "default dtype", "the global generator")


def process_state() -> tuple[Any, ...]:
    """What a call leaves behind in its caller, which a compile must not change: the grad and inference modes
    inside the caller's block, the default dtype, and the global generator (no program draws from it: a compile
    that does changes every number the caller draws next)."""
    rng = torch.random.get_rng_state()
    return (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.get_default_dtype(),
        hash(rng.numpy().tobytes()),
    )


Grads = tuple[list[Any] | None, BaseException | None]


def backward(out: Any, leaves: list[torch.Tensor], weight_dtypes: list[torch.dtype] | None = None) -> Grads:
    """The leaves' gradients after a backward of the outputs that require grad, or the error it raised.

    Each output is weighted by a fixed random tensor (drawn in ``weight_dtypes``, by default the outputs'
    own), so a gradient in the wrong place shows; ``(None, None)`` when no output requires grad.
    """
    outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves or not outs:
        return None, None
    dtypes = weight_dtypes if weight_dtypes is not None and len(weight_dtypes) == len(outs) else [t.dtype for t in outs]
    g = torch.Generator().manual_seed(0)
    try:
        sum((t * torch.randn(t.shape, generator=g, dtype=d).to(t.dtype)).sum() for t, d in zip(outs, dtypes)).backward()
    except Exception as error:
        return None, error
    return [leaf.grad for leaf in leaves], None


def _unreached_as_none(expected: list[Any] | None, actual: list[Any] | None) -> list[Any] | None:
    """``actual`` with a zero gradient read as None where eager's backward never reached the leaf.

    A compiled graph is one autograd node: its backward gives every input that requires grad a gradient,
    zeros for those no used output depends on, as torch.compile's graphs do; eager leaves them None.
    """
    if expected is None or actual is None or len(expected) != len(actual):
        return actual
    return [
        None if e is None and isinstance(a, torch.Tensor) and not a.count_nonzero() else a
        for e, a in zip(expected, actual)
    ]


def _compare_grads(
    backend: str, call: int, expected: Grads, actual: Grads, reference: Any = None, nudged: Any = None
) -> Failure | None:
    """The gradients' first difference; ``reference()`` gives eager's gradients in float64 for a value
    difference, which is rounding when it is no larger than a few times eager's own float32 error."""
    failure = _compare_errors(backend, call, expected[1], actual[1]) if expected[1] or actual[1] else None
    if failure:
        return dataclasses.replace(failure, kind=f"backward_{failure.kind}")
    actual_grads = _unreached_as_none(expected[0], actual[0])
    diff = compare_values(expected[0], actual_grads, "grad")
    if diff and not (
        diff[0] == "value" and reference is not None and _within_rounding(expected[0], actual_grads, reference, nudged)
    ):
        return Failure(backend, call, "grad", "", f"call {call}: {diff[1]}")
    return None


def _within_rounding(expected: list[Any], actual: list[Any], reference: Any, nudged: Any = None) -> bool:
    """Whether every compiled float32 or float64 value is as close to eager's as eager's own is to the float64
    one (or, given ``nudged()``, to eager's own run on inputs moved by a few ulps).

    An ill-conditioned result (``3 / v ** 2`` into a LayerNorm's gradient, a batch norm of a constant input,
    whose variance is rounding over ``sqrt(eps)``) is float32 noise in eager too: there the compiled one differs
    from eager's by rounding alone, and a fixed tolerance cannot tell that apart. A tensor that eager gets
    wrong beyond the tolerance somewhere is such a result as a whole: its noise is the worst of eager's errors
    in it, since an element whose rounding happened to cancel in eager (a gradient of a LayerNorm over equal
    values, normalized at zero) is no more exact than its neighbours. Elsewhere each element keeps its own.
    A value that cancels large terms (a bias's gradient through a LayerNorm, exactly 0) may be close to the
    float64 one in eager by luck: eager's run on nudged inputs draws its noise again, and the larger of the two
    errors is the element's.
    """
    try:
        exact = reference()
    except Exception:  # no float64 twin of this program: the difference stands
        return False
    if exact is None or len(exact) != len(expected):
        return False
    again = nudged() if nudged is not None else None
    if again is None or len(again) != len(expected):
        again = [None] * len(expected)
    single = _tolerance(torch.float32)
    for e, a, r, n in zip(expected, actual, exact, again, strict=True):
        if isinstance(e, float) and isinstance(a, float) and isinstance(r, float):
            allowed = max(4 * abs(e - r), single["atol"] + single["rtol"] * abs(e))
            if not abs(a - e) <= allowed:
                return False
            continue
        if isinstance(e, torch.Tensor) and e.dtype not in (torch.float32, torch.float64):
            if not (isinstance(a, torch.Tensor) and torch.equal(e, a)):
                return False
            continue
        if not isinstance(e, torch.Tensor):
            if type(e) is not type(a) or e != a:  # (None, ints, bools: exact)
                return False
            continue
        if not isinstance(a, torch.Tensor) or not isinstance(r, torch.Tensor) or r.shape != e.shape:
            return False
        # A float64 result is held to float64's own floor: eager's error against the float64 twin is that of a
        # float32 intermediate promoted into it (a177:182: a LayerNorm over cancelling rows, then .double()).
        tolerance = _tolerance(e.dtype)
        error = (e.double() - r.double()).abs()
        finite = error[error.isfinite()]
        # (an infinite error licenses no value: where eager or float64 is not finite, the rules below decide)
        error = torch.where(error.isfinite(), error, 0.0)
        if finite.numel() and bool((error > tolerance["atol"] + tolerance["rtol"] * r.double().abs()).any()):
            # Ill-conditioned: the tensor's noise is its worst finite error (an overflow floors nothing).
            error = torch.maximum(error, finite.max())
        if isinstance(n, torch.Tensor) and n.shape == e.shape and n.dtype == e.dtype:
            redrawn = (e.double() - n.double()).abs()
            error = torch.maximum(error, torch.where(redrawn.isfinite(), redrawn, 0.0))
        allowed = torch.maximum(4 * error, tolerance["atol"] + tolerance["rtol"] * e.double().abs())
        close = ((a.double() - e.double()).abs() <= allowed) & e.isfinite() | (a == e) | (a.isnan() & e.isnan())
        # Where eager's own rounding made a finite result NaN or infinite (a mask of `v < 0` on a sum that is 0 up
        # to rounding, then a softmax of all -inf), the float64 value is the one to be close to.
        rounded_away = e.double().isfinite().logical_not() & r.double().isfinite()
        exact_close = (a.double() - r.double()).abs() <= tolerance["atol"] + tolerance["rtol"] * r.double().abs()
        # Where eager's float32 and float64 runs disagree on a value neither gives finite (-inf against inf: an
        # infinite gradient times a residue that is 0 up to rounding, whose sign rounding picks), no value is
        # eager's own: any non-finite one, NaN included (the residue computed as 0), is as good.
        undetermined = ~e.isfinite() & ~r.isfinite() & ~((e.double() == r) | (e.isnan() & r.isnan()))
        if not bool((close | (rounded_away & exact_close) | (undetermined & ~a.isfinite())).all()):
            return False
    return True


def _eager_replayed(
    source: str,
    call: int,
    tag: str,
    weights: list[torch.dtype] | None,
    modules: Callable[[torch.nn.Module], Any],
    argument: Callable[[torch.Tensor], torch.Tensor],
) -> Any:
    """Eager's outputs and gradients at ``call`` of a twin of the program: ``modules(MODS)`` applied once, each
    float32 argument replaced by ``argument(a)``, the calls before it replayed (for the modules' state). The
    leaves' gradients come back through the replacement, and the outputs are weighted by the noise drawn in
    ``weights``' dtypes. None when the twin raises."""
    ns = _load(source, tag)
    result = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if "MODS" in ns:
            modules(ns["MODS"])
        for i in range(call + 1):
            args = ns["make_args"](ns["CALLS"][i], i)
            leaves = _leaves(ns)
            args = [argument(a) if isinstance(a, torch.Tensor) and a.dtype == torch.float32 else a for a in args]
            out, error, _ = _call(ns["fn"], args, ns, i)
            if error is not None:
                return None
            grads, error = backward(out, leaves, weights)
            if error is not None:
                return None
            result = out, grads
    return result


def _eager_in_float64(source: str, call: int, tag: str, weights: list[torch.dtype] | None) -> Any:
    """Eager's outputs and gradients at ``call`` with the modules and the float32 arguments in float64 (see
    :func:`_eager_replayed`)."""
    return _eager_replayed(source, call, f"{tag}-float64", weights, torch.nn.Module.double, torch.Tensor.double)


def _grad_weights(expected: Any) -> list[torch.dtype]:
    """The dtypes of eager's outputs that require grad: the weights of a twin's backward are drawn in them."""
    return [t.dtype for t in pytree.tree_leaves(expected) if isinstance(t, torch.Tensor) and t.requires_grad]


# How far each float32 argument and parameter is moved for eager's nudged run: a few ulps.
_NUDGE = 2.0**-21


def eager_grads_nudged(source: str, call: int, tag: str, expected: Any) -> list[Any] | None:
    """Eager's gradients at ``call`` in float32, with every float32 argument and module parameter moved by
    ``_NUDGE`` up or down elementwise (a fixed draw), the outputs weighted as eager's (``expected``): a second
    sample of eager's rounding. None when that run raises or an argument cannot be moved in place."""
    draw = torch.Generator().manual_seed(0)

    def nudged(t: torch.Tensor) -> torch.Tensor:
        signs = torch.randint(0, 2, t.shape, generator=draw).to(t.dtype) * 2 - 1
        with torch.no_grad():
            return t.mul_(1 + _NUDGE * signs)

    def nudge_parameters(modules: torch.nn.Module) -> None:
        for parameter in modules.parameters():
            if parameter.dtype == torch.float32:
                nudged(parameter)

    try:
        result = _eager_replayed(source, call, f"{tag}-nudged", _grad_weights(expected), nudge_parameters, nudged)
    except RuntimeError:  # an argument whose elements share memory (an expanded tensor) cannot be moved
        return None
    return None if result is None else result[1]


def eager_grads_in_float64(source: str, call: int, tag: str, expected: Any) -> list[Any] | None:
    """Eager's gradients at ``call`` in float64 (see :func:`_eager_in_float64`), the outputs weighted by the
    noise drawn for eager's outputs (``expected``)."""
    result = _eager_in_float64(source, call, tag, _grad_weights(expected))
    return None if result is None else result[1]


def eager_outputs_in_float64(source: str, call: int, tag: str) -> list[Any] | None:
    """Eager's outputs at ``call`` in float64, as pytree leaves (see :func:`_eager_in_float64`)."""
    result = _eager_in_float64(source, call, tag, None)
    return None if result is None else pytree.tree_leaves(result[0])


def run_backend(
    source: str,
    backend: str,
    eager: list[tuple[list[Any], Any, BaseException | None, Grads, dict[str, Any], Any]],
    calls: int,
    tag: str,
    dynamic: bool | None = None,
) -> Failure | None:
    """Run the compiled program under ``backend`` for the first ``calls`` calls; the first difference from eager."""
    ns = _load(source, f"{tag}-{backend}")
    compiled = dynajit.compiler.compile(ns["fn"], backend=backend, dynamic=dynamic)
    frames: list[Any] = []
    strict_error = getattr(dynajit.capture, "StrictModeError", None)
    for call in range(calls):
        e_args, expected, e_error, e_grads, e_modules, e_state = eager[call]
        args = ns["make_args"](ns["CALLS"][call], call)
        leaves = _leaves(ns)
        with warnings.catch_warnings(record=True) as caught, dynajit.capture.observe() as seen:
            warnings.simplefilter("always")
            try:
                with _deadline(TIMEOUT_SECONDS):
                    actual, error, state = _call(compiled, args, ns, call)
                    grads = backward(actual, leaves) if error is None else (None, None)
            except _Timeout:
                return Failure(backend, call, "timeout", "", f"call {call} took over {TIMEOUT_SECONDS}s")
        frames.extend(seen.frames)
        for w in caught:
            text = str(w.message)
            if issubclass(w.category, RuntimeWarning) and "cache_size_limit" in text:
                return Failure(backend, call, "cache_limit", "", text)
            if issubclass(w.category, RuntimeWarning) and "eagerly" in text:
                return Failure(backend, call, "fallback", "", _fallback_reason(text))
        for frame in seen.frames:
            if frame.kind in ("eager", "error") and not (frame.kind == "error" and error is not None and e_error):
                return Failure(backend, call, "fallback", frame.kind, f"frame {frame.kind}: {frame.reason}")
        if strict_error is not None and isinstance(error, strict_error):
            return Failure(backend, call, "fallback", "StrictModeError", str(error))
        if state != e_state:
            changed = [what for what, e, a in zip(_STATE_PARTS, e_state, state, strict=True) if e != a]
            return Failure(
                backend, call, "process_state", ",".join(changed), f"call {call} changed {', '.join(changed)}"
            )
        if e_error is not None or error is not None:
            failure = _compare_errors(backend, call, e_error, error)
            if failure:
                return failure
            continue
        diff = compare_outputs(expected, actual, e_args, args)
        if (
            diff
            and diff[0] == "value"
            and _within_rounding(
                pytree.tree_leaves(expected),
                pytree.tree_leaves(actual),
                lambda call=call: eager_outputs_in_float64(source, call, tag),
            )
        ):
            diff = compare_outputs(expected, actual, e_args, args, values=False)
        if diff:
            return Failure(backend, call, diff[0], "", f"call {call} sizes {ns['CALLS'][call]}: {diff[1]}")
        failure = _compare_grads(
            backend,
            call,
            e_grads,
            grads,
            lambda call=call, expected=expected: eager_grads_in_float64(source, call, tag, expected),
            lambda call=call, expected=expected: eager_grads_nudged(source, call, tag, expected),
        )
        if failure:
            return failure
        diff = compare_values(e_modules, _module_state(ns), "module state")
        if diff:
            return Failure(backend, call, "module_state", "", f"call {call}: {diff[1]}")
    return None


def _fallback_reason(text: str) -> str:
    match = re.search(r"failed \((.*)\): an internal", text, re.S)
    return match.group(1) if match else text


def _compare_errors(
    backend: str, call: int, expected: BaseException | None, actual: BaseException | None
) -> Failure | None:
    if expected is None and actual is not None:
        return Failure(backend, call, "raised", type(actual).__name__, f"{type(actual).__name__}: {actual}")
    if expected is not None and actual is None:
        return Failure(
            backend, call, "not_raised", type(expected).__name__, f"eager raised {type(expected).__name__}: {expected}"
        )
    assert expected is not None and actual is not None
    if type(expected) is not type(actual):
        return Failure(
            backend,
            call,
            "exception_type",
            f"{type(expected).__name__}->{type(actual).__name__}",
            f"eager {type(expected).__name__}: {expected}; compiled {type(actual).__name__}: {actual}",
        )
    return None


def _leaves(ns: dict[str, Any]) -> list[torch.Tensor]:
    """The tensors whose gradients are compared: the arguments' leaves and the modules' parameters (their
    gradients cleared, so each call's backward is compared on its own)."""
    leaves = list(ns["LEAVES"]) + list(ns["MODS"].parameters() if "MODS" in ns else [])
    for leaf in leaves:
        leaf.grad = None
    return leaves


def _module_state(ns: dict[str, Any]) -> dict[str, Any]:
    """The modules' parameters and buffers (BatchNorm's running statistics) after a call."""
    return {k: v.detach().clone() for k, v in ns["MODS"].state_dict().items()} if "MODS" in ns else {}


def run_eager(
    source: str, calls: int, tag: str
) -> list[tuple[list[Any], Any, BaseException | None, Grads, dict[str, Any], Any]]:
    """Each call's arguments (after the call), result, exception, gradients, module state and process state, run
    eagerly."""
    ns = _load(source, f"{tag}-eager")
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for call in range(calls):
            args = ns["make_args"](ns["CALLS"][call], call)
            leaves = _leaves(ns)
            out, error, state = _call(ns["fn"], args, ns, call)
            grads = backward(out, leaves) if error is None else (None, None)
            results.append((args, out, error, grads, _module_state(ns), state))
    return results


def check(
    program: Program, backends: tuple[str, ...] = BACKENDS, calls: int | None = None, tag: str = "p"
) -> list[Failure]:
    """Every backend's first failure on ``program`` (an empty list: all backends agree with eager)."""
    with layout_timings_restored():
        return _check(program, backends, calls, tag)


@contextlib.contextmanager
def layout_timings_restored() -> Iterator[None]:
    """Undo what a program forcing the layout decisions (``layouts``) did to inductor-lite's timings and memory rule."""
    from dynajit.inductor_lite import _layout

    saved = _layout._conv_seconds, _layout._seconds, _layout._peak_bytes
    try:
        yield
    finally:
        _layout._conv_seconds, _layout._seconds, _layout._peak_bytes = saved


def _check(program: Program, backends: tuple[str, ...], calls: int | None, tag: str) -> list[Failure]:
    source = program.source()
    ncalls = len(program.calls) if calls is None else calls
    eager = run_eager(source, ncalls, tag)
    failures = []
    half = (
        _HALF["bfloat16"]
        if "bfloat16" in source
        else _HALF["float16"]
        if "float16" in source or ".half()" in source
        else None
    )
    with _strict_patch(), _half_tolerance(half):
        for backend in backends:
            try:
                failure = run_backend(source, backend, eager, ncalls, tag, program.dynamic)
            except Exception as error:  # the fuzzer's own comparison must not stop the run
                failure = Failure(backend, -1, "harness", type(error).__name__, f"{type(error).__name__}: {error}")
            finally:
                dynajit.compiler.reset()
            if failure:
                failures.append(failure)
    return failures


_WARM_UP = """
import torch

def fn(x):
    y = torch.relu(x @ x.t()).sum(0)
    return y[y > 0].numel(), y.softmax(0)

CALLS = [{}, {}]

def make_args(s, call):
    return [torch.randn(3 + call, 4)]
"""


def warm_up(backends: tuple[str, ...] = BACKENDS) -> None:
    """Run one small program under every backend with no deadline, so the lazy imports of capture, AOT
    autograd and the backends happen here: a deadline expiring inside an import would leave a half-initialised
    module behind, and every later program would fail on it."""
    ns = _load(_WARM_UP, "warm-up")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for backend in backends:
            compiled = dynajit.compiler.compile(ns["fn"], backend=backend)
            for call in range(len(ns["CALLS"])):
                compiled(*ns["make_args"]({}, call))
            dynajit.compiler.reset()


def strict_env() -> None:
    """Ask for strict mode through the environment too (for capture versions reading it at import)."""
    os.environ.setdefault("DYNAJIT_STRICT", "1")
