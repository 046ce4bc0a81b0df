"""A seeded generator of small random tensor programs, checked statement by statement by running them eagerly.

The generator keeps the program built so far and, for each candidate
statement, runs the whole prefix eagerly on every call's fresh inputs: a
candidate that raises (or makes a tensor too large) is dropped, so every
program runs eagerly on every call, except a deliberate last raising
statement (feature ``errors``). Choosing operands from the values the prefix
actually produced keeps shapes and dtypes right without modelling them.
Everything random comes from one ``random.Random(seed)``: a seed names a
program.
"""

from __future__ import annotations

import ast
import random
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as pytree

from .containers import ContainerMixin
from .expressions import ExpressionMixin, near_ties, rounding, sign_conditioned
from .facts import FactsMixin, draw_facts
from .features import Features
from .flow import FlowMixin
from .objects import ObjectsMixin
from .program import HEADER, STATE_SOURCE, ArgSpec, Program, Stmt, render_body

MAX_NUMEL = 4096
SYMBOLS = ("s0", "s1", "s2")
ALLOWED_ERRORS = (RuntimeError, IndexError, ValueError, TypeError)
# Ints no narrower dtype holds: past int8/uint8, float16, int32; int64's bounds, and past them (Python's ints).
BIG_INTS = (300, 70000, 2**31 + 5, -(2**31) - 3, 2**40 + 3, 2**63 - 1, -(2**63), 2**63 + 7, -(2**64))
CONTEXTS = (
    "torch.no_grad()",
    "torch.enable_grad()",
    "torch.set_grad_enabled(False)",
    "torch.inference_mode()",
    'torch.autocast("cpu", dtype=torch.bfloat16)',
    'torch.autocast("cpu", enabled=False)',
)


def _margin(t: torch.Tensor, value: float) -> float:
    """How near a threshold a value of ``t`` read by a condition may be before rounding could decide it."""
    return 1e-3 if t.dtype in (torch.float32, torch.float64) else rounding(t) * (1 + abs(value))


def _clear_of(t: torch.Tensor, read: Callable[[torch.Tensor], Any], threshold: float) -> bool:
    """Whether the value ``read`` takes from ``t`` is far enough from ``threshold`` that rounding cannot decide
    which side of it a condition finds (an integer or bool tensor's values are exact: not read)."""
    if not t.is_floating_point():
        return True
    value = float(read(t.detach()))
    return abs(value - threshold) > _margin(t, value)


def data_conditions(name: str, values: list[torch.Tensor]) -> list[str]:
    """The conditions on the values of tensor ``name`` (``values``: its value on each call, call 0's first) that
    rounding cannot decide.

    A threshold a float lands on up to rounding (the sum of a LayerNorm's output is 0, a softmax's mean 1/n)
    splits eager and compiled by rounding alone: such a condition is left out. It is checked on every call's
    value: the facts a call sets (a BatchNorm put in training mode) can move a value onto its threshold.
    """
    first = values[0]
    return [
        cond
        for cond, read, threshold in [
            (f"{name}.sum() > 0", lambda v: v.sum(), 0.0),
            (f"({name} > 0).any()", lambda v: v.max() if v.numel() else -1.0, 0.0),  # decided by the largest
            (f"{name}.float().mean() < 0.5", lambda v: v.float().mean(), 0.5),
            (f"{name}.max() > 1" if first.numel() else "False", lambda v: v.max() if v.numel() else 2.0, 1.0),
            (f"{name}.numel() > 0 and {name}.flatten()[0] > 0", lambda v: v.flatten()[0] if v.numel() else 1.0, 0.0),
        ]
        if all(_clear_of(v, read, threshold) for v in values)
    ]


def _no_internal_overlap(t: torch.Tensor) -> bool:
    """True when no two elements of ``t`` share memory (an expanded tensor's do)."""
    return all(stride != 0 or size <= 1 for size, stride in zip(t.shape, t.stride(), strict=True))


class _Frame:
    """A body being generated: ``fn``'s, a module-level helper's, or a nested def's."""

    def __init__(self, body: list[Stmt], params: list[tuple[str, str]], closure: bool, parent: _Frame | None):
        self.body = body
        self.params = params  # (parameter name, argument expression in the parent frame)
        self.closure = closure
        self.parent = parent


FLOATS = ("float32", "float64", "bfloat16", "float16")
_BITS_AS_INT = {torch.float32: "torch.int32", torch.float64: "torch.int64"}


class Generator(ExpressionMixin, ContainerMixin, ObjectsMixin, FactsMixin, FlowMixin):
    """Builds one :class:`Program` from a seed and a :class:`Features`."""

    def __init__(self, seed: str, features: Features, max_statements: int = 12):
        self.rng = random.Random(seed)
        self.features = features
        self.program = Program(seed=seed, args=[], calls=[], dynamic=None if features.dynamic_shapes else False)
        self.max_statements = max_statements
        self.counter = 0
        self.frame = _Frame(self.program.body, [], False, None)
        self.main = self.frame
        self.finished = False  # a raising statement was kept: nothing may follow it
        self.half = False  # whether the program computes in bfloat16 or float16 (arguments, casts)
        # Outputs of convolutions with a bias: a training-mode BatchNorm of one cancels the bias, whose gradient
        # is then zero up to rounding (eager's 1e-3 is noise, as is any other value).
        self.channel_shifted: set[str] = set()

    # ------------------------------------------------------------------ arguments and calls

    def _make_signature(self) -> None:
        rng, feat = self.rng, self.features
        ncalls = 4 if feat.new_sizes else 3
        calls: list[dict[str, int]] = []
        base = {s: rng.randint(2, 5) for s in SYMBOLS}
        for i in range(ncalls):
            if i < 2 or not feat.new_sizes:
                calls.append(dict(base))
                continue
            sizes = {}
            for s in SYMBOLS:
                low = 0 if feat.zero_size and rng.random() < 0.15 else 1 if feat.size_one and rng.random() < 0.2 else 2
                sizes[s] = rng.randint(low, 7) if low < 2 else rng.randint(2, 7)
            calls.append(sizes)
        self.program.calls = calls
        nargs = rng.choice([1, 2, 2, 3, 3])
        dtypes = ["float32"] * 6 + (["float64", "int64", "int64", "bool"] if feat.dtypes else [])
        self.half = feat.half_dtypes and rng.random() < 0.2  # a looser tolerance: only in some programs
        dtypes += ["bfloat16", "float16"] * 3 if self.half else []
        if feat.layouts and feat.modules and rng.random() < 0.25:
            # (an image batch first, with fixed channels: a module call on it may be a 2-D convolution)
            self.program.layout = {"channels_last": rng.random() < 0.7, "matmuls": rng.random() < 0.5}
            dims = [rng.choice(SYMBOLS[:2]), rng.choice([2, 3, 4]), rng.choice(SYMBOLS[:2]), rng.choice(SYMBOLS[:2])]
            self.program.args.append(ArgSpec("x0", "tensor", "float32", dims, "contiguous"))
        for i in range(len(self.program.args), nargs):
            ndim = rng.choice([0, 1, 2, 2, 2, 3, 3, 4]) if i else rng.choice([1, 2, 2, 3])
            if ndim == 0 and not feat.zero_dim:
                ndim = 1
            dims: list[int | str] = []
            for _ in range(ndim):
                r = rng.random()
                if r < 0.6:
                    dims.append(rng.choice(SYMBOLS[:2]) if rng.random() < 0.8 else SYMBOLS[2])
                elif r < 0.75 and feat.size_one:
                    dims.append(1)
                else:
                    dims.append(rng.choice([2, 3, 4]))
            layout = "contiguous"
            if feat.noncontiguous_inputs and ndim and rng.random() < 0.25:
                layout = rng.choice(["transposed", "strided", "offset", "piece"][ndim < 2 :])
            self.program.args.append(ArgSpec(f"x{i}", "tensor", rng.choice(dtypes), dims, layout))
        if feat.special_values and rng.random() < 0.15:
            for arg in self.program.args:
                arg.specials = arg.kind == "tensor" and arg.dtype in FLOATS and rng.random() < 0.6
        if feat.autograd and rng.random() < 0.25:
            for arg in self.program.args:
                arg.grad = arg.dtype in ("float32", "float64") and rng.random() < 0.75
        self.program.module_grads = not feat.modules or rng.random() < 0.5
        if feat.int_arg and rng.random() < 0.3:
            values = [rng.randint(1, 4)] * 2 + [rng.randint(0 if feat.zero_size else 1, 5) for _ in calls[2:]]
            if feat.big_ints and len(values) > 2 and rng.random() < 0.3:
                values[-1] = rng.choice(BIG_INTS)
            self.program.args.append(ArgSpec("n", "int", int_values=values))
        if feat.changed_facts and rng.random() < 0.3:
            self.program.facts = draw_facts(rng, len(calls))
        if feat.ambient_modes and rng.random() < 0.25:
            self.program.modes = [rng.choice(["grad", "no_grad", "inference"]) for _ in calls]
        if feat.objects and rng.random() < 0.3:
            dims = [rng.choice(SYMBOLS[:2]) for _ in range(rng.randint(1, 2))]
            # The first call's trace sees two lists (mostly) or one; a later call sees the other case.
            first = rng.random() < 0.3
            later = [rng.random() < 0.5 for _ in calls[1:]]
            later[rng.randrange(len(later))] = not first
            shared = [first, *later] if feat.shared_objects and len(calls) > 1 else []
            self.program.args.append(ArgSpec("st", "state", dims=dims, shared=shared))

    # ------------------------------------------------------------------ running the prefix

    def _module_namespace(self) -> dict[str, Any]:
        ns: dict[str, Any] = {}
        helpers = "\n".join(line for h in self.program.helpers for line in render_body(h, ""))
        source = HEADER + STATE_SOURCE + helpers + "\n" + "\n".join(self.program.module_lines())
        exec(compile(source, "<fuzz-gen>", "exec"), ns)
        return ns

    def namespaces(self) -> list[dict[str, Any]]:
        """Per call, the current frame's variables after running everything generated so far."""
        module = self._module_namespace()
        maker_src = Program(seed="", args=self.program.args, calls=self.program.calls).source()
        maker: dict[str, Any] = {}
        exec(compile(maker_src, "<fuzz-args>", "exec"), maker)
        chain = []
        frame: _Frame | None = self.frame
        while frame is not None:
            chain.append(frame)
            frame = frame.parent
        chain.reverse()
        codes = [compile("\n".join(render_body(f.body, "")) or "pass", "<fuzz-body>", "exec") for f in chain]
        result = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for call, sizes in enumerate(self.program.calls):
                if "set_facts" in module:  # rebinds K in the module's namespace: before the copy
                    module["set_facts"](call)
                ns = dict(module)
                ns.update(zip([a.name for a in self.program.args], maker["make_args"](sizes, call), strict=True))
                torch.manual_seed(call)  # (random draws take the values the runs will: each run is seeded so)
                for i, (frame, code) in enumerate(zip(chain, codes, strict=True)):
                    if i:
                        inner = dict(ns) if frame.closure else dict(module)
                        inner.update({p: eval(expr, ns) for p, expr in frame.params})
                        ns = inner
                    exec(code, ns)
                result.append(ns)
        self._globals = set(module)
        return result

    def _too_big(self, namespaces: list[dict[str, Any]]) -> bool:
        for ns in namespaces:
            for value in ns.values():
                if isinstance(value, torch.Tensor) and value.numel() > MAX_NUMEL:
                    return True
        return False

    def _try(self, stmt: Stmt) -> bool:
        """Append ``stmt`` if the program still runs on every call (or, rarely, keep it as a raising end)."""
        self.frame.body.append(stmt)
        try:
            spaces = self.namespaces()
        except ALLOWED_ERRORS:
            if self.features.errors and self.frame is self.main and self.rng.random() < 0.03:
                self.finished = True
                return True
            self.frame.body.pop()
            return False
        except Exception:
            self.frame.body.pop()
            return False
        if self._too_big(spaces) or self._backward_fails(spaces):
            self.frame.body.pop()
            return False
        self.spaces = spaces
        return True

    def _backward_fails(self, namespaces: list[dict[str, Any]]) -> bool:
        """Whether a backward through the tensors the program holds raises (an op with no derivative, a saved
        tensor written in place). Eager raises only when a backward reaches such a node, while a compiled frame
        cannot build its training graph at all: strict mode then rightly refuses it, so the program judges
        nothing."""
        if not any(a.grad for a in self.program.args) and not (self.program.modules and self.program.module_grads):
            return False
        for ns in namespaces:
            held = [t for t in _tensors_in([ns[k] for k in ns if k not in self._globals]) if t.requires_grad]
            if held:
                try:
                    sum(t.sum() for t in held).backward()
                except RuntimeError:
                    return True
        return False

    # ------------------------------------------------------------------ statements

    def assign(self) -> bool:
        made = self.expr()
        if made is None:
            return False
        code, simpler = made
        if self.features.call_breaks and self.rng.random() < 0.1:
            code = _break_in_a_call(code, self.rng) or code
        target = self.fresh()
        alts = [[Stmt([f"{target} = {s}"])] for s in simpler]
        return self._try(Stmt([f"{target} = {code}"], alts=alts))

    def _inplace_line(self, target: str) -> str | None:
        rng, t = self.rng, self.value(target)
        b = self._broadcast_partner(target) if rng.random() < 0.5 else self.scalar()
        if b == target and not self.features.self_inplace:
            b = "2"
        if b != target and b in self.spaces[0] and isinstance(self.value(b), torch.Tensor):
            if t.dtype == torch.bool and not sign_conditioned(self._every_call(b)):
                b = "True"  # (a float 0 up to rounding is True or False at rounding's whim: a192:52)
            elif self.value(b).dtype != t.dtype:
                b = f"{b}.to({target}.dtype)"
        is_number = not isinstance(self.spaces[0].get(b), torch.Tensor) and not b.endswith(".dtype)")
        copy = "copy_" if self.features.scalar_copy or not is_number else "fill_"
        ops = [f"{target}.add_({b})", f"{target}.mul_({b})", f"{target}.{copy}({b})", f"{target}.sub_(1)"]
        ops += [f"{target}.zero_()", f"{target}.fill_(1)", f"{target} += {b}", f"{target} *= 2"]
        ops += [f"torch.add({target}, {b}, out={target})", f"torch.Tensor.mul_({target}, 2)"]
        # Writes that change what the written tensor is: its bits read as an int of the same size, an out= of
        # another shape (eager resizes it, a view over its base's memory), and detach_ (refused for a view).
        # (not of a NaN: which NaN an op returns is the kernel's choice, eager's vectorised minimum gives all ones)
        if t.dtype in _BITS_AS_INT and not any(bool(v.isnan().any()) for v in self._every_call(target)):
            bits = rng.choice([_BITS_AS_INT[t.dtype], f"BITS[{target}.dtype]"])
            ops.append(f"{target}.view({bits}).add_(1)")
        if t.dim() >= 1:
            ops.append(f"torch.mul({b}, 2, out={target}[:0])")
        ops.append(f"{target}.detach_()")
        if t.is_floating_point():
            ops += [f"{target}.clamp_(min=0)", f"{target}.div_(2)", f"torch.relu_({target})", f"{target}.sigmoid_()"]
            ops.append(f"torch.nn.functional.relu({target}, inplace=True)")
            if not any(a.specials for a in self.program.args):
                # eager's own gradient of hardtanh at a NaN is 0 in its vectorised loop and 1 in the loop's scalar
                # tail (16 NaNs give 0s, a 17th gets 1): no compiled answer can match it by position
                ops.append(f"torch.nn.functional.hardtanh({target}, -1.0, 1.0, True)")
        if t.dim() >= 1:
            idx = rng.choice(["0", "-1", "1:", "::2", "..., 0", ":, 1:" if t.dim() >= 2 else "1:"])
            val = rng.choice(["0", "1", b])
            ops += [f"{target}[{idx}] = {val}", f"{target}[{idx}] += 1"]
            if t.dtype != torch.bool:
                ops.append(f"{target}[{target} > 0] = 0")
        return rng.choice(ops)

    def inplace(self) -> bool:
        feat, rng = self.features, self.rng
        args = [a.name for a in self.program.args if a.kind == "tensor"]
        kinds = []
        if feat.inplace_input:
            kinds.append("input")
        if feat.inplace_view and (feat.views or feat.slices):
            kinds.append("view")
        if feat.inplace_local:
            kinds.append("local")
        if not kinds:
            return False
        kind = rng.choice(kinds)
        writable = None if feat.overlapping_inplace else _no_internal_overlap
        if kind == "input":
            target = self._pick([a for a in self._tensors(writable) if a in args and self._unaliased(a)])
        elif kind == "local":
            target = self._pick([a for a in self._tensors(writable) if a not in args and self._unaliased(a)])
        else:
            base = self._pick([a for a in self._tensors() if a in args and self._unaliased(a)])
            if base is None:
                return False
            view = self._e_slice(base) if rng.random() < 0.6 or not feat.views else self._e_view(base)
            if view is None:
                return False
            name = self.fresh()
            line = self._view_inplace(name, view)
            return line is not None and self._try(Stmt(line))
        if target is None:
            return False
        line = self._inplace_line(target)
        return line is not None and self._try(Stmt([line]))

    def _unaliased(self, name: str, value: torch.Tensor | None = None) -> bool:
        """Whether an in-place op on ``name`` is allowed: always, or (``mutate_aliased`` off) no other local views
        its memory."""
        if self.features.mutate_aliased:
            return True
        value = self.value(name) if value is None else value
        ptr = value.untyped_storage().data_ptr()
        return not any(
            isinstance(other, torch.Tensor) and other.untyped_storage().data_ptr() == ptr
            for key, other in self._locals().items()
            if key != name
        )

    def _view_inplace(self, name: str, view: str) -> list[str] | None:
        # Evaluate the view on call 0 to pick an in-place op that fits it.
        try:
            value = eval(view, {**self._module_namespace(), **self.spaces[0]})
        except Exception:
            return None
        if not self.features.overlapping_inplace and not _no_internal_overlap(value):
            return None
        self.spaces[0][name] = value
        try:
            line = self._inplace_line(name)
        finally:
            del self.spaces[0][name]
        return None if line is None else [f"{name} = {view}", line]

    def metadata_inplace(self) -> bool:
        target = self.tensor()
        if target is None:
            return False
        t = self.value(target)
        ops = [f"{target}.unsqueeze_(0)", f"{target}.squeeze_()"]
        if t.dim() <= 2:
            ops.append(f"{target}.t_()")
        if t.dim() >= 2:
            ops.append(f"{target}.transpose_(0, 1)")
        return self._try(Stmt([self.rng.choice(ops)]))

    def aliasing(self) -> bool:
        target = self.tensor()
        if target is None:
            return False
        alias = self.fresh("r")
        made = self._e_unary(target) if self.rng.random() < 0.5 else self._e_binary(target)
        return self._try(Stmt([f"{alias} = {target}", f"{target} = {made}"], alts=[[Stmt([f"{alias} = {target}"])]]))

    def _branch_bodies(self) -> tuple[list[Stmt], list[Stmt]] | None:
        """Two bodies assigning the same fresh name (``then`` and ``else``)."""
        first = self.expr()
        second = self.expr()
        if first is None or second is None:
            return None
        target = self.fresh()
        then = [Stmt([f"{target} = {first[0]}"])]
        other = [Stmt([f"{target} = {second[0]}"])]
        if self.rng.random() < 0.3:
            other.insert(0, Stmt([f"{target} = {second[0]}"]))
            line = self._inplace_line_safe(target, second[0])
            if line:
                other.append(Stmt([line]))
        return then, other

    def _inplace_line_safe(self, target: str, code: str) -> str | None:
        try:
            value = eval(code, {**self._module_namespace(), **self.spaces[0]})
        except Exception:
            return None
        if not isinstance(value, torch.Tensor):
            return None
        if not self.features.overlapping_inplace and not _no_internal_overlap(value):
            return None
        if not self._unaliased(target, value):
            return None
        self.spaces[0][target] = value
        try:
            return self._inplace_line(target)
        finally:
            del self.spaces[0][target]

    def branch(self, data: bool) -> bool:
        rng = self.rng
        a = self.tensor()
        if a is None:
            return False
        t = self.value(a)
        if data:
            conds = data_conditions(a, self._every_call(a)) or ["True"]
        else:
            d = rng.randrange(t.dim()) if t.dim() else None
            conds = [f"{a}.dim() == {t.dim()}", f"{a}.dtype == torch.float32", f"{a}.is_contiguous()", "True"]
            if d is not None:
                conds += [
                    f"{a}.shape[{d}] > {rng.randint(1, 4)}",
                    f"{a}.size({d}) == 1",
                    f"len({a}) >= 2",
                    f"{a}.numel() == 0",
                ]
                conds += [f"{a}.shape[{d}] % 2 == 0"]
        bodies = self._branch_bodies()
        if bodies is None:
            return False
        then, other = bodies
        stmt = Stmt(clauses=[(f"if {rng.choice(conds)}:", then), ("else:", other)], alts=[then, other])
        return self._try(stmt)

    def scalar_read(self) -> bool:
        a = self.tensor(lambda t: t.numel() > 0)
        if a is None:
            return False
        name = self.fresh("f")
        values = self._every_call(a)
        code = self.rng.choice(
            [
                f"float({a}.sum())",
                f"{a}.max().item()",
                f"int({a}.argmax())" if not any(near_ties(v) for v in values) else f"{a}.max().item()",
                f"{a}.flatten()[0].item()",
                # Every element zero up to rounding (the variance of equal values): rounding decides any().
                f"bool({a}.any())"
                if all(not v.numel() or _clear_of(v, lambda v: v.abs().max(), 0.0) for v in values)
                else f"{a}.max().item()",
            ]
        )
        return self._try(Stmt([f"{name} = {code}"]))

    def context(self) -> bool:
        """Statements under a grad mode or autocast context manager, sometimes with a graph break inside."""
        rng = self.rng
        first, second = self.expr(), self.expr()
        if first is None:
            return False
        target = self.fresh()
        manager = rng.choice(CONTEXTS)
        body = [Stmt([f"{target} = {first[0]}"])]
        if second is not None and rng.random() < 0.5:
            body.append(Stmt([f"{self.fresh()} = {second[0]}"]))
        if self.features.graph_breaks and rng.random() < 0.3:
            body.insert(
                rng.randint(0, len(body)), Stmt([rng.choice(['print(end="")', "dynajit.capture.graph_break()"])])
            )
        return self._try(Stmt(clauses=[(f"with {manager}:", body)], alts=[body]))

    def _helper_body(self, params: list[tuple[str, str]], closure: bool, body: list[Stmt]) -> str | None:
        """Generate a function body in a new frame; return its result expression."""
        outer = self.frame
        self.frame = _Frame(body, params, closure, outer)
        try:
            self.spaces = self.namespaces()
            for _ in range(self.rng.randint(1, 3)):
                self.step(nested=True)
            result = self._pick(self._tensors())
        except Exception:
            result = None
        finally:
            self.frame = outer
            self.spaces = self.namespaces()
        return result

    def helper_call(self, nested: bool) -> bool:
        rng = self.rng
        names = self._tensors()
        if not names:
            return False
        actuals = list(dict.fromkeys(self._pick(names) for _ in range(rng.randint(1, 2))))
        params = [(f"p{i}", a) for i, a in enumerate(actuals)]
        body: list[Stmt] = []
        result = self._helper_body(params, closure=nested, body=body)
        if result is None:
            return False
        name = self.fresh("inner" if nested else "helper")
        header = f"def {name}({', '.join(p for p, _ in params)}):"
        ret = Stmt([f"return {result}"])
        target = self.fresh()
        call = Stmt([f"{target} = {name}({', '.join(actuals)})"], alts=[[Stmt([f"{target} = {actuals[0]}"])]])
        if nested:
            if not self._try(Stmt([], clauses=[(header, [*body, ret])])):
                return False
            if self._try(call):
                return True
            self.frame.body.pop()
            self.spaces = self.namespaces()
            return False
        self.program.helpers.append([Stmt([], clauses=[(header, [*body, ret])])])
        if self._try(call):
            return True
        self.program.helpers.pop()
        return False

    def module_call(self) -> bool:
        """``v = MODS[i](a)`` with a new module sized to ``a``'s dims that are the same on every call."""
        rng = self.rng
        a = self.tensor(lambda t: t.dim() >= 1)
        if a is None:
            return False
        values = self._every_call(a)
        fixed = {d for d in range(-values[0].dim(), 0) if len({v.dim() for v in values}) == 1}
        fixed = {d for d in fixed if len({v.shape[d] for v in values}) == 1}
        width, out = values[0].shape[-1], rng.choice([3, 5, 8])
        kinds = []
        if values[0].dtype == torch.float32 and -1 in fixed:
            kinds += [f"torch.nn.Linear({width}, {out})", f"torch.nn.LayerNorm({width})"]
        if values[0].dtype == torch.float32 and values[0].dim() in (2, 3) and -2 in fixed:
            channels = values[0].shape[-2]
            training = _batch_statistics_conditioned(values, 1) and a not in self.channel_shifted
            mode = rng.choice(["", ".eval()"]) if training else ".eval()"
            if values[0].dim() == 3:
                kinds.append(f"torch.nn.BatchNorm1d({channels}){mode}")
            kinds.append(f"torch.nn.Conv1d({channels}, {out}, 3, padding=1)")
        if values[0].dtype == torch.float32 and values[0].dim() == 4 and -3 in fixed:
            channels = values[0].shape[-3]
            training = _batch_statistics_conditioned(values, 1) and a not in self.channel_shifted
            # eager's own training-mode BatchNorm2d backward over a height or width of 1 depends on the incoming
            # gradient's strides: given a channels-last-like one (a transpose of the output), its weight gradient
            # pairs the wrong elements (torch 2.13, 2.14), where float64 arithmetic agrees with the compiled one
            training = training and all(v.shape[-1] > 1 and v.shape[-2] > 1 for v in values)
            mode = rng.choice(["", ".eval()"]) if training else ".eval()"
            shape = rng.choice(
                ["1", "1", "1, bias=False", "1, stride=2", "3, padding=1", "3, padding=1, groups=" + str(channels)]
            )
            kinds += [f"torch.nn.Conv2d({channels}, {out if 'groups' not in shape else channels}, {shape})"]
            kinds += [f"torch.nn.BatchNorm2d({channels}){mode}"]
        if values[0].dtype == torch.int64:
            kinds.append(f"torch.nn.Embedding(10, {out})")
        if not kinds:
            return False
        kind = rng.choice(kinds)
        operand = f"{a}.abs() % 10" if kind.startswith("torch.nn.Embedding") else a
        self.program.modules.append(kind)
        target = self.fresh()
        if self._try(Stmt([f"{target} = MODS[{len(self.program.modules) - 1}]({operand})"])):
            if kind.startswith("torch.nn.Conv") and "bias=False" not in kind:
                self.channel_shifted.add(target)
            return True
        self.program.modules.pop()
        return False

    def graph_break(self) -> bool:
        return self._try(Stmt([self.rng.choice(['print(end="")', "dynajit.capture.graph_break()"])]))

    def step(self, nested: bool = False) -> bool:
        """Add one statement of a randomly chosen kind (returns whether one was kept)."""
        feat, rng = self.features, self.rng
        choices = [("assign", 10, True)]
        choices += [
            ("inplace", 3, feat.inplace_input or feat.inplace_view or feat.inplace_local),
            ("metadata", 1, feat.inplace_metadata),
            ("alias", 1, feat.aliasing),
            ("shape_if", 2, feat.shape_control),
            ("data_if", 1, feat.data_branch),
            ("scalar", 1, feat.data_branch),
            ("loop", 1, feat.loops),
            ("container", 1, feat.containers),
            ("helper", 1, feat.helpers and not nested),
            ("nested", 1, feat.nested_helpers and not nested),
            ("break", 1, feat.graph_breaks),
            ("module", 2, feat.modules),
            ("state", 3, feat.objects and self.program.takes_state),
            ("fact", 2, feat.changed_facts and bool(self.program.facts)),
            ("context", 1, feat.contexts),
            ("try", 1, feat.exceptions),
        ]
        names = [n for n, _, on in choices if on]
        weights = [w for _, w, on in choices if on]
        kind = rng.choices(names, weights)[0]
        return {
            "assign": self.assign,
            "inplace": self.inplace,
            "metadata": self.metadata_inplace,
            "alias": self.aliasing,
            "shape_if": lambda: self.branch(data=False),
            "data_if": lambda: self.branch(data=True),
            "scalar": self.scalar_read,
            "loop": self.loop,
            "container": self.container,
            "helper": lambda: self.helper_call(nested=False),
            "nested": lambda: self.helper_call(nested=True),
            "break": self.graph_break,
            "module": self.module_call,
            "state": self.state_statement,
            "fact": self.fact_statement,
            "context": self.context,
            "try": self.try_statement,
        }[kind]()

    def _returns(self) -> None:
        rng, feat = self.rng, self.features
        local = self._locals()
        args = {a.name for a in self.program.args}
        values = [k for k, v in local.items() if isinstance(v, torch.Tensor | int | float | bool | list | tuple | dict)]
        # Outputs are compared leaf by leaf: a container holding an object (a State's box) has no value to compare.
        plain = torch.Tensor | int | float | bool | type(None)
        values = [k for k in values if all(isinstance(leaf, plain) for leaf in pytree.tree_leaves(local[k]))]
        if not feat.return_views:
            values = [k for k in values if k not in args and not self._aliases_input(local[k])]
        made = [k for k in values if k not in args]
        picks = made[-2:] if made else []
        if values and rng.random() < 0.6:
            picks.append(rng.choice(values))
        self.program.returns = list(dict.fromkeys(picks)) or ([values[-1]] if values else [])
        self.program.return_style = rng.choice(["tuple", "tuple", "list", "dict", "single"])
        if self.program.return_style == "single":
            self.program.returns = self.program.returns[:1]

    def _aliases_input(self, value: Any) -> bool:
        if not isinstance(value, torch.Tensor):
            return isinstance(value, list | tuple | dict)
        ptrs = {self.spaces[0][a.name].untyped_storage().data_ptr() for a in self.program.args if a.kind == "tensor"}
        return value.untyped_storage().data_ptr() in ptrs

    def generate(self) -> Program:
        """Build the program: signature, then statements until the budget or a raising statement."""
        self._make_signature()
        self.spaces = self.namespaces()
        target = self.rng.randint(2, self.max_statements)
        kept = attempts = 0
        while kept < target and attempts < 4 * target and not self.finished:
            attempts += 1
            if self.step():
                kept += 1
        self._returns()
        return self.program


def _break_in_a_call(code: str, rng: random.Random) -> str | None:
    """``code`` with one argument of one of its calls passed through ``brk`` (None if it makes no call)."""
    tree = ast.parse(code, mode="eval")
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and [a for a in node.args if not isinstance(a, ast.Starred)]
    ]
    if not calls:
        return None
    call = rng.choice(calls)
    index = rng.choice([i for i, a in enumerate(call.args) if not isinstance(a, ast.Starred)])
    call.args[index] = ast.Call(ast.Name("brk", ast.Load()), [call.args[index]], [])
    return ast.unparse(tree)


def _tensors_in(values: list[Any], depth: int = 3) -> list[torch.Tensor]:
    """The tensors in ``values``, in their containers and in objects' attributes (``depth`` levels down)."""
    found = []
    for value in values:
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif depth and isinstance(value, (list, tuple)):
            found += _tensors_in(list(value), depth - 1)
        elif depth and isinstance(value, dict):
            found += _tensors_in(list(value.values()), depth - 1)
        elif depth and hasattr(value, "__dict__") and not callable(value):
            found += _tensors_in(list(vars(value).values()), depth - 1)
    return found


def generate(seed: str, features: Features | None = None, max_statements: int = 12) -> Program:
    """The program named by ``seed`` (the same seed and features always give the same program)."""
    torch.manual_seed(0)
    return Generator(seed, features or Features(), max_statements).generate()


def _batch_statistics_conditioned(values: list[torch.Tensor], channel_dim: int) -> bool:
    """Whether a training-mode BatchNorm over ``values`` (on every call) normalises by a spread its rounding cannot
    swamp: a channel of equal values (or nearly) divides a mean's last-ulp error by ``sqrt(eps)``, 316 times it,
    and eager's and a compiled mean may round differently (``x.copy_(12)`` then a BatchNorm)."""
    for v in values:
        if v.numel() == 0:
            continue
        rows = v.detach().double().transpose(0, channel_dim).reshape(v.shape[channel_dim], -1)
        spread = (rows.var(1, correction=0) + 1e-5).sqrt()
        if bool((spread < 1e-3 * rows.abs().amax(1).clamp(min=1.0)).any()):
            return False
    return True
