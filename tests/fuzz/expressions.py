"""The fuzzer's operands and expression vocabulary: tensor-valued expressions over a program's current locals.

Operands are picked from the values the generated prefix produced on the
first call, so shapes and dtypes stay valid without being modelled. Each
``_e_<kind>`` method returns the source of one expression of its kind over a
tensor local ``a``, or ``None`` when ``a`` does not suit it.
:class:`ExpressionMixin` is mixed into the generator, which owns the state
named in its annotations.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from .features import Features


def unary_ops(floating: bool, specials: bool) -> list[str]:
    """The unary ops of a program's expressions: of a float tensor too, when it is one; with no GELU where the
    arguments hold NaNs and infinities (eager's float32 GELU of +inf is NaN in its vectorised loop and inf in its
    scalar loop, which one element takes, and in float64: a79-1:1899, no compiled answer matches it by size)."""
    ops = ["abs", "neg", "relu", "square", "sign"]
    if floating:
        ops += ["sin", "cos", "exp", "tanh", "sigmoid", "floor", "ceil", "round", "erf", "log1p", "sqrt"]
        ops += ["reciprocal", "nn.functional.silu", "nn.functional.softplus"]
        ops += [] if specials else ["nn.functional.gelu"]
    return ops


class ExpressionMixin:
    """Operand picking and expressions for :class:`tests.fuzz.generator.Generator`."""

    rng: random.Random
    features: Features
    half: bool
    spaces: list[dict[str, Any]]
    _globals: set[str]
    counter: int

    # ------------------------------------------------------------------ picking operands

    def _locals(self) -> dict[str, Any]:
        ns = self.spaces[0]
        return {k: v for k, v in ns.items() if k not in self._globals and not k.startswith("__")}

    def _tensors(self, pred=None) -> list[str]:
        names = [k for k, v in self._locals().items() if isinstance(v, torch.Tensor) and (pred is None or pred(v))]
        return names

    def _pick(self, names: list[str]) -> str | None:
        if not names:
            return None
        # Recent values are likelier: they carry the program's history.
        weights = [1 + i for i in range(len(names))]
        return self.rng.choices(names, weights)[0]

    def tensor(self, pred=None) -> str | None:
        """A tensor local (optionally satisfying ``pred`` on call 0's value)."""
        return self._pick(self._tensors(pred))

    def value(self, name: str) -> Any:
        return self.spaces[0][name]

    def _every_call(self, name: str) -> list[torch.Tensor]:
        """``name``'s tensor value on each call (call 0's first), where it is a tensor."""
        return [ns[name] for ns in self.spaces if isinstance(ns.get(name), torch.Tensor)]

    def fresh(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def dim(self, name: str, extra: int = 0) -> int | None:
        nd = self.value(name).dim() + extra
        if nd == 0:
            return None
        d = self.rng.randrange(nd)
        return d - nd if self.rng.random() < 0.3 else d

    def scalar(self, name: str | None = None) -> str:
        """A Python number, sometimes read from a shape (a symbolic int under dynamic shapes)."""
        rng = self.rng
        r = rng.random()
        ints = [k for k, v in self._locals().items() if type(v) is int]
        if r < 0.15 and ints:
            return rng.choice(ints)
        if r < 0.3:
            shaped = self._tensors(lambda t: t.dim() > 0)
            if shaped:
                t = rng.choice(shaped)
                return rng.choice([f"{t}.shape[{rng.randrange(self.value(t).dim())}]", f"{t}.size(-1)", f"{t}.numel()"])
        # (0.0 and -0.0 are equal and hash alike, but x / (y * -0.0) is not x / (y * 0.0))
        return rng.choice(["2", "3", "-1", "0.5", "1.5", "-2.0", "1", "0", "0.0", "-0.0"])

    # ------------------------------------------------------------------ expressions

    def expr(self) -> tuple[str, list[str]] | None:
        """A tensor-valued expression over the current locals, and simpler ones the shrinker may use instead."""
        feat = self.features
        kinds = []
        for name, weight, on in (
            ("unary", 5, feat.pointwise),
            ("binary", 6, feat.pointwise),
            ("reduce", 4, feat.reductions),
            ("view", 4, feat.views),
            ("slice", 3, feat.slices),
            ("expand", 2, feat.expand),
            ("matmul", 2, feat.matmul),
            ("cat", 1, feat.cat),
            ("create", 1, feat.creation),
            ("index", 1, feat.indexing),
            ("cast", 1, feat.dtypes),
            ("model", 3, feat.model_ops),
            ("random", 1, feat.random),
        ):
            if on:
                kinds.append((name, weight))
        if not kinds:
            return None
        for _ in range(6):
            kind = self.rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
            a = self.tensor()
            if a is None:
                return None
            code = getattr(self, f"_e_{kind}")(a)
            if code is not None:
                return code, [a]
        return None

    def _e_unary(self, a: str) -> str:
        rng, t = self.rng, self.value(a)
        if t.dtype == torch.bool:
            return rng.choice([f"~{a}", f"torch.logical_not({a})", f"{a}.int().long()", f"{a}.float() * 2"])
        op = rng.choice(unary_ops(t.is_floating_point(), any(arg.specials for arg in self.program.args)))
        # The reciprocal of a value zero up to rounding is rounding's choice, and so is the gradient of its square
        # root (+-inf or NaN: a LayerNorm over one element is 0 in one backward formula and -1e-9 in another).
        singular = near_zero(t)
        if op in ("reciprocal", "sqrt") and singular:
            op = "abs"
        # floor and ceil jump at integers, round halfway between: of a value within rounding of one, on any call,
        # each picks rounding's side (ceil of a softmax's sum, 1 + 6e-8 compiled and 1 in eager: a145:57).
        steps = {"floor": 0.0, "ceil": 0.0, "round": 0.5}
        if op in steps and any(near_step(v, steps[op]) for v in self._every_call(a)):
            op = "abs"
        forms = [f"torch.{op}({a})"]
        if "." not in op:
            forms.append(f"{a}.{op}()")
        forms += [f"{a}.clamp(min={rng.choice(['-0.5', '0', '1'])})", f"torch.clamp({a}, -1, 2)", f"-{a}"]
        root = f"torch.nan_to_num({a}.sqrt())" if not singular else f"{a} * 0.5"
        forms += [f"{a} ** 2", root if t.is_floating_point() else f"{a} * {a}"]
        return rng.choice(forms)

    def _broadcast_partner(self, a: str) -> str:
        """Another tensor broadcastable with ``a`` on call 0 (same shape first), or ``a`` itself."""
        shape = self.value(a).shape
        same = self._tensors(lambda t: t.shape == shape)
        if self.features.expand and self.rng.random() < 0.5:

            def fits(t: torch.Tensor) -> bool:
                try:
                    torch.broadcast_shapes(t.shape, shape)
                except RuntimeError:
                    return False
                return True

            same = self._tensors(fits)
        return self._pick(same) or a

    def _e_binary(self, a: str) -> str:
        rng = self.rng
        b = self._broadcast_partner(a) if rng.random() < 0.7 else self.scalar()
        op = rng.choice(["+", "-", "*", "/", "*", "+", "<", ">=", "==", "max", "min", "where", "pow", "//", "%"])
        ta = self.value(a)
        if op in ("//", "%"):
            divisor = rng.choice(["2", "3", "-2"]) if rng.random() < 0.7 else "2.5"
            # A float at a multiple of the divisor up to rounding (the mean of a LayerNorm's output) jumps there.
            if ta.is_floating_point() and ta.numel():
                quotient = ta.double() / float(divisor)
                if bool(((quotient - quotient.round()).abs() < rounding(ta) * (1 + quotient.abs())).any()):
                    return f"{a} + {b}"
            return f"{a} {op} {divisor}"
        if op == "max":
            return f"torch.maximum({a}, {b})" if b in self.spaces[0] else f"{a}.clamp(min={b})"
        if op == "min":
            return f"torch.minimum({a}, {b})" if b in self.spaces[0] else f"{a}.clamp(max={b})"
        if op == "where":
            cond = f"{a} > 0" if ta.dtype != torch.bool else a
            return f"torch.where({cond}, {a}, {b})"
        if op == "pow":
            return f"torch.pow({a}, 2)" if ta.dtype != torch.bool else f"{a} | {b}"
        if ta.dtype == torch.bool and op in "+-":
            return f"{a} ^ {b}" if b in self.spaces[0] else f"{a}.long() {op} {b}"
        first, second = rng.choice([(a, b), (b, a)])
        if op == "/" and second in self.spaces[0] and near_zero(self.value(second)):
            op = "*"  # a quotient by a value that is zero up to rounding (a LayerNorm's sum) is rounding's choice
        if op in ("<", ">=", "==") and a != b and any(near_equal(ns[a], ns.get(b, b)) for ns in self.spaces if a in ns):
            # Two values equal up to rounding (`x` and `x.sqrt() ** 2`): eager's float32 sqrt is a last ulp off on
            # AVX-512 where the kernels' is exact, and the comparison makes that ulp a different bool.
            op = "+"
        return f"{first} {op} {second}"

    def _e_reduce(self, a: str) -> str | None:
        rng, t = self.rng, self.value(a)
        if not self.features.reduce_size_one and (t.numel() <= 1 or 1 in t.shape):
            return None
        d = self.dim(a)
        keep = rng.choice(["True", "False"])
        ops = ["sum", "amax", "amin", "argmax", "argmin", "prod", "any", "all", "max", "min", "count_nonzero"]
        if t.is_floating_point():
            ops += ["mean", "std", "var", "logsumexp", "softmax", "log_softmax", "norm", "mean", "is_max", "is_min"]
            ops += ["nanmedian", "nansum", "nanmean", "logcumsumexp", "var_mean"]
        if t.dtype != torch.bool:
            ops += ["cumsum", "median", "kthvalue", "cummax", "cummin", "aminmax"]
        op = rng.choice(ops)
        ordered = ("argmax", "argmin", "max", "min", "is_max", "is_min", "median", "nanmedian", "kthvalue")
        if op in (*ordered, "cummax", "cummin", "aminmax") and near_ties(t):
            op = "sum"  # which of two values equal up to rounding is the largest (the middle) is rounding's choice
        if op in ("kthvalue", "cummax", "cummin", "logcumsumexp"):
            return self._order_statistic(a, op, d, keep)
        if op in ("count_nonzero", "nansum", "nanmean", "aminmax", "var_mean"):
            return self._nan_aware_reduction(a, op, d, keep)
        if op in ("median", "nanmedian") and d is not None and t.dim() and t.stride(d) == 0 and t.shape[d] > 1:
            op = "sum"  # eager's median(dim) over an expanded dim reads memory it never wrote (torch 2.13, 2.14)
        if op in ("median", "nanmedian"):
            return f"{a}.{op}()" if d is None else f"{a}.{op}({d}, keepdim={keep}).values"
        if op in ("is_max", "is_min"):
            # The elements equal to their own maximum: exact only if every loop computing them rounds alike.
            extreme = "amax" if op == "is_max" else "amin"
            return f"{a} == {a}.{extreme}()" if d is None else f"{a} == {a}.{extreme}({d}, keepdim=True)"
        whole = ("logsumexp", "softmax", "log_softmax", "cumsum")
        if d is None or op in ("norm",) or (rng.random() < 0.2 and op not in whole):
            return f"{a}.{op}()" if op not in ("logsumexp", "softmax", "log_softmax", "cumsum") else f"{a}.sum()"
        if op in ("softmax", "log_softmax"):
            return rng.choice([f"{a}.{op}({d})", f"torch.{op}({a}, dim={d})"])
        if op == "cumsum":
            return f"{a}.cumsum({d})"
        if op in ("max", "min"):
            return rng.choice(
                [f"{a}.{op}({d}, keepdim={keep}).values", f"{a}.{op}(dim={d})[1]", f"torch.{op}({a}, {d})[0]"]
            )
        if op in ("sum", "mean", "amax") and t.dim() >= 2 and rng.random() < 0.3:
            return f"{a}.{op}(dim=(0, -1), keepdim={keep})"
        if op == "sum" and rng.random() < 0.2:
            return f"torch.sum({a}, {d}, dtype=torch.float64)"
        return f"{a}.{op}({d}, keepdim={keep})" if op not in ("any", "all") or rng.random() < 0.5 else f"{a}.{op}({d})"

    def _order_statistic(self, a: str, op: str, d: int | None, keep: str) -> str:
        """The smallest value along a dim, or a running maximum, minimum or log-sum-exp (values only: which of
        two equal elements is picked is the kernel's choice)."""
        if op == "kthvalue":
            return f"{a}.kthvalue(1)[0]" if d is None else f"{a}.kthvalue(1, {d}, keepdim={keep}).values"
        dim = 0 if d is None else d
        return f"{a}.{op}({dim})" if op == "logcumsumexp" else f"{a}.{op}({dim}).values"

    def _nan_aware_reduction(self, a: str, op: str, d: int | None, keep: str) -> str:
        """Reductions that skip NaNs or count, and the two-result ones (``aminmax``, ``var_mean``)."""
        if op == "count_nonzero":
            return f"torch.count_nonzero({a})" if d is None else f"torch.count_nonzero({a}, {d})"
        if op == "aminmax":
            pick = self.rng.choice(["min", "max"])
            return f"torch.aminmax({a}).{pick}" if d is None else f"torch.aminmax({a}, dim={d}, keepdim={keep}).{pick}"
        if op == "var_mean":
            which = self.rng.choice([0, 1])
            return (
                f"torch.var_mean({a})[{which}]" if d is None else f"torch.var_mean({a}, {d}, keepdim={keep})[{which}]"
            )
        return f"{a}.{op}()" if d is None else f"{a}.{op}({d}, keepdim={keep})"

    def _e_view(self, a: str) -> str:
        rng, t = self.rng, self.value(a)
        nd = t.dim()
        forms = [f"{a}.reshape(-1)", f"{a}.flatten()", f"{a}.unsqueeze({rng.randint(-nd - 1, nd)})", f"{a}.squeeze()"]
        forms += [f"{a}.contiguous()", f"{a}.clone()", f"{a}.view({a}.shape)"]
        if t.dtype in (torch.float32, torch.float64):
            # a view whose elements aten reads negated (the negative bit): -a, held as a
            forms.append(f"torch.complex({a}, {a}).conj().imag")
        if t.is_contiguous():
            forms.append(f"{a}.view(-1)")
        if nd >= 1:
            d = self.dim(a)
            forms += [f"{a}.squeeze({d})", f"{a}.movedim({d}, 0)"]
            if t.shape[d] and t.shape[d] % 2 == 0:
                forms.append(f"{a}.unflatten({d}, (2, -1))")
        if nd >= 2:
            d1, d2 = rng.sample(range(nd), 2)
            perm = list(range(nd))
            rng.shuffle(perm)
            forms += [f"{a}.transpose({d1}, {d2})", f"{a}.permute({', '.join(map(str, perm))})", f"{a}.mT"]
            forms += [f"{a}.flatten(0, 1)", f"{a}.reshape({a}.shape[0], -1)", f"{a}.view({a}.shape[0], -1)"]
            forms += [f"{a}.diagonal()"]
        if nd == 2:
            forms += [f"{a}.t()", f"{a}.T"]
        return rng.choice(forms)

    def _e_slice(self, a: str) -> str | None:
        rng, t = self.rng, self.value(a)
        nd = t.dim()
        if nd == 0:
            return None
        d = self.dim(a)
        parts = []
        for i in range(nd):
            r = rng.random()
            if r < 0.5:
                parts.append(":")
            elif r < 0.65:
                parts.append(f"{rng.choice(['', '1', '-2'])}:{rng.choice(['', '-1', '3'])}")
            elif r < 0.8:
                parts.append(f"{rng.choice(['', '1'])}::{rng.choice(['2', '3'])}")
            elif r < 0.9 and t.shape[i] > 0:
                parts.append(str(rng.choice([0, -1])))
            else:
                parts.append("None" if rng.random() < 0.5 else ":")
        if rng.random() < 0.2:
            parts = ["...", parts[-1]]
        index = ", ".join(parts)
        forms = [f"{a}[{index}]"]
        if t.shape[d] > 0:
            forms += [f"{a}.select({d}, -1)", f"{a}.narrow({d}, 0, 1)"]
            # (an unbind of a long dim of symbolic size costs the fake tensors minutes: a170:47, 300 outputs)
            if all(v.dim() == t.dim() and v.shape[d] <= 16 for v in self._every_call(a)):
                forms.append(f"{a}.unbind({d})[0]")
        forms += [f"{a}.chunk(2, {d})[-1]" if t.shape[d] > 1 else f"{a}.chunk(1, {d})[0]", f"{a}.split(2, {d})[0]"]
        return rng.choice(forms)

    def _e_expand(self, a: str) -> str | None:
        rng, t = self.rng, self.value(a)
        others = self._tensors(lambda o: o.dim() >= t.dim())
        target = self._pick(others)
        forms = [f"{a}.unsqueeze(0).expand({rng.choice(['2', '3', '1'])}, *{a}.shape)"]
        if target is not None:
            try:
                torch.broadcast_shapes(t.shape, self.value(target).shape)
                forms += [f"{a}.expand_as({target})", f"{a}.broadcast_to({target}.shape)", f"{a} + {target}"]
            except RuntimeError:
                pass
        if t.dim() >= 1 and t.shape[-1] == 1:
            forms.append(f"{a}.expand(*{a}.shape[:-1], {rng.choice(['3', '2'])})")
        return rng.choice(forms)

    def _e_matmul(self, a: str) -> str | None:
        rng, t = self.rng, self.value(a)
        if t.dtype == torch.bool or t.dim() == 0:
            return None
        same = self._tensors(
            lambda o: o.dtype == t.dtype and o.dim() >= 1 and t.dim() >= 1 and o.shape[0] == t.shape[-1]
        )
        b = self._pick(same)
        forms = []
        if t.dim() == 2:
            forms += [f"{a} @ {a}.t()", f"torch.mm({a}.t(), {a})", f"{a}.mT @ {a}"]
        if t.dim() == 3:
            forms += [f"torch.bmm({a}, {a}.transpose(1, 2))", f"torch.matmul({a}, {a}.mT)"]
        if t.dim() == 1:
            forms += [f"{a} @ {a}", f"torch.outer({a}, {a})"]
        if b is not None:
            forms += [f"{a} @ {b}", f"torch.matmul({a}, {b})"]
        if t.dim() >= 1:
            forms.append(f"torch.nn.functional.linear({a}, {a}.new_ones(2, {a}.shape[-1]))")
        return rng.choice(forms) if forms else None

    def _e_cat(self, a: str) -> str | None:
        rng, t = self.rng, self.value(a)
        if t.dim() == 0:
            return f"torch.stack([{a}, {a} + 1])"
        d = self.dim(a)
        b = self._pick(self._tensors(lambda o: o.dim() == t.dim() and o.dtype == t.dtype)) or a
        return rng.choice(
            [f"torch.cat([{a}, {b}], {d})", f"torch.stack([{a}, {a} * 2], {d})", f"torch.cat(({a}, {a}))"]
        )

    def _e_create(self, a: str) -> str:
        rng, t = self.rng, self.value(a)
        forms = [f"torch.zeros_like({a})", f"torch.ones_like({a}) * 3", f"torch.full_like({a}, 2)"]
        forms += [f"{a}.new_zeros({a}.shape)", f"{a}.new_ones(3)"]
        if t.dim() >= 1:
            forms += [
                f"torch.arange({a}.shape[0])",
                f"torch.ones({a}.shape[-1], 2)",
                f"torch.arange({a}.numel()).view({a}.shape)",
            ]
        return rng.choice(forms)

    def _e_random(self, a: str) -> str:
        forms = [f"{a} + torch.rand({a}.shape)", f"torch.where(torch.rand({a}.shape) < 0.5, {a}, 0)"]
        forms += [
            f"torch.randn({a}.shape) * 2",
            f"torch.randint(0, 3, {a}.shape)",
            f"torch.rand({a}.shape).bernoulli()",
        ]
        if self.value(a).dim() >= 1:
            forms.append(f"{a}[torch.randperm({a}.shape[0])]")
        return self.rng.choice(forms)

    def _e_index(self, a: str) -> str | None:
        rng, t = self.rng, self.value(a)
        if t.dim() == 0:
            return None
        forms = [f"{a}[{a} > 0]" if t.dtype != torch.bool else f"{a}[{a}]"]
        if t.shape[0] > 0:
            forms += [f"{a}[torch.tensor([0, -1, 0])]", f"{a}.index_select(0, torch.tensor([0, 0]))"]
            forms += [f"torch.gather({a}, 0, torch.zeros_like({a}, dtype=torch.long))"]
        if t.dim() >= 2 and t.shape[0] > 1 and t.shape[1] > 0:
            forms.append(f"{a}[[0, 1], [0, -1]]")
        # Lookups at positions a tensor holds (a transformer's embeddings, a loss's gather), every one in range.
        forms.append(f"torch.gather({a}, -1, (torch.arange({a}.numel()).view({a}.shape) * 5 + 3) % {a}.shape[-1])")
        if t.dim() == 2:
            forms.append(f"torch.nn.functional.embedding(torch.arange(2 * {a}.shape[0]).flip(0) % {a}.shape[0], {a})")
        return rng.choice(forms)

    def _e_model(self, a: str) -> str | None:
        """The ops transformer and CNN code adds to the basics: masks, padding, attention, sorting, scatters."""
        rng, t = self.rng, self.value(a)
        if t.dtype == torch.bool:
            return None
        nd, floating = t.dim(), t.is_floating_point()
        fill = "-1e4" if floating else "-1"
        # (a mask of `a > 0` over an element that is 0 up to rounding follows rounding's whim, on any call)
        maskable = sign_conditioned([ns[a] for ns in self.spaces if a in ns])
        forms = [f"{a}.masked_fill({a} > 0, {fill})"] if maskable else []
        forms += [f"torch.nn.functional.pad({a}, (1, 2))" if nd else f"{a} + 1"]
        if nd:
            d = self.dim(a)
            forms += [f"{a}.flip({d})", f"{a}.roll(1, {d})", f"{a}.roll(-2)", f"torch.diff({a}, dim={d})"]
            forms += [f"{a}.repeat({', '.join(['2'] + ['1'] * (nd - 1))})", f"{a}.cumsum({d}).flip({d})"]
            forms += [
                f"torch.zeros_like({a}).index_add(0, torch.zeros({a}.shape[0], dtype=torch.long), {a})",
                f"torch.zeros_like({a}).scatter_add({d}, torch.zeros_like({a}, dtype=torch.long), {a})",
            ]
        if nd >= 2:
            forms += [
                f"{a}.tril()",
                f"{a}.triu(1)",
                f"torch.tril({a}, -1)",
                f"torch.nn.functional.pad({a}, (0, 1, 1, 0))",
            ]
        if not floating:
            return rng.choice(forms)
        forms += [f"torch.softmax({a}.masked_fill({a} < 0, float('-inf')), -1)" if nd and maskable else f"{a}.exp()"]
        b = self._broadcast_partner(a)
        if b != a and self.value(b).is_floating_point():
            forms.append(f"torch.lerp({a}, {b}, 0.3)")
        if nd:
            d = self.dim(a)
            forms += [f"torch.nn.functional.normalize({a}, dim={d})", f"{a}.cumprod({d})"]
            if all(
                v.dim() > 0 and v.shape[-1] > 1 and not near_zero(v.double().var(-1, correction=0).to(v.dtype))
                for v in (ns[a] for ns in self.spaces if a in ns)  # (unbound on a call whose loop ran no turn)
            ):
                # (a row of equal values normalises to zero up to rounding, as a one-element row does, on any call)
                forms.append(f"torch.nn.functional.layer_norm({a}, {a}.shape[-1:])")
            if t.shape[d] and not near_ties(t):
                # (of two values equal up to rounding, which one sorts first is rounding's choice)
                forms += [f"{a}.topk(1, {d}).values", f"{a}.sort({d}).values", f"{a}.sort({d}, descending=True)[0]"]
        if nd == 2:
            forms += [f"torch.einsum('ij,kj->ik', {a}, {a})", f"torch.addmm({a}[:, :1], {a}, {a}.mT)"]
        if nd == 3:
            forms += [f"torch.einsum('bij,bkj->bik', {a}, {a})", f"torch.baddbmm({a}[..., :1], {a}, {a}.mT)"]
        if nd >= 3 and all(v.dim() and v.shape[-1] > 1 for v in (ns[a] for ns in self.spaces if a in ns)):
            # (at head dim 1 attention's backward gives a gradient whose size-1 dim has a stride eager's batch norm
            # backward misreads: its gradients are wrong, the compiled ones right, a129:110)
            sdpa = "torch.nn.functional.scaled_dot_product_attention"
            forms += [f"{sdpa}({a}, {a}, {a})", f"{sdpa}({a}, {a} * 0.5, {a}, is_causal=True)"]
        return rng.choice(forms)

    def _e_cast(self, a: str) -> str:
        half = ["bfloat16", "float16"] if self.half else []
        t = self.value(a)
        # NaN, an infinity or a float beyond int64 has no integer value: C++ and torch leave the cast undefined
        # (eager's kernel gives INT64_MIN, the x86 instruction's answer; a compiled loop may give 0).
        # On every call: a value empty on the first calls holds elements later (a138:800, cos(2.5e-4) is 1.0 in
        # eager, 1 - 6e-8 correctly rounded and compiled, and `.long()` made them 1 and 0).
        integral = not t.is_floating_point() or all(
            bool((v.detach().double().abs() < 2.0**62).all()) and not near_nonzero_integer(v)
            for v in self._every_call(a)
        )
        # (8-, 16- and 32-bit integers wrap in eager: a float converts through int32, keeping its low bits)
        small = ["int32", "int16", "int8", "uint8"] if integral else []
        # A float that is 0 up to rounding on some call is True or False at rounding's whim (a192:52, the mean of
        # a LayerNorm's outputs).
        boolean = ["bool"] if not t.is_floating_point() or sign_conditioned(self._every_call(a)) else []
        dtype = self.rng.choice(["float32", "float64", *(["int64"] if integral else []), *boolean, *half, *small])
        return self.rng.choice(
            [f"{a}.to(torch.{dtype})", f"{a}.float()", f"{a}.double()", *([f"{a}.bool()"] if boolean else [])]
            + ([f"{a}.long()"] if integral else [])
            + ([f"{a}.bfloat16()", f"{a}.half()"] if half else [])
        )


# How far from a value rounding may put it, relative to 1, by dtype: a few of its ulps, and for float32 and float64
# the rounding of a float32 intermediate summed over a few dims. A half-precision program rounds after every op.
_ROUNDING = {torch.bfloat16: 3e-2, torch.float16: 4e-3}


def rounding(t: Any) -> float:
    """How far rounding may move a value of ``t``'s dtype near 1 (see ``_ROUNDING``)."""
    return _ROUNDING.get(t.dtype, 1e-4) if isinstance(t, torch.Tensor) else 1e-4


def near_zero(t: Any) -> bool:
    """Whether a float tensor has an element that is zero up to rounding (a computed 0 may come out as 1e-9)."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or not t.numel():
        return False
    return bool((t.detach().double().abs() < rounding(t)).any())


def near_nonzero_integer(t: Any) -> bool:
    """Whether a float tensor has an element within rounding of an integer other than 0, where a conversion to an
    integer truncates rounding's choice (a layer norm of two elements is 1 - 4e-8 in eager and 1.0 compiled, and
    ``.long()`` made one 0 and the other 1: a129:2556)."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or not t.numel():
        return False
    v = t.detach().double()
    nearest = v.round()
    return bool(((nearest != 0) & ((v - nearest).abs() <= rounding(t) * nearest.abs())).any())


def near_step(t: Any, offset: float) -> bool:
    """Whether a float tensor has an element within rounding of an integer plus ``offset`` (0 or 0.5), where
    floor, ceil (0) or round (0.5) jumps."""
    if not isinstance(t, torch.Tensor) or not t.is_floating_point() or not t.numel():
        return False
    v = t.detach().double() - offset
    nearest = v.round()
    return bool(((v - nearest).abs() <= rounding(t) * nearest.abs().clamp(min=1)).any())


def sign_conditioned(values: list[Any]) -> bool:
    """Whether the sign of every element of every value is not rounding's (no element is 0 up to rounding)."""
    return not any(near_zero(v) for v in values)


def near_equal(t: Any, other: Any) -> bool:
    """Whether some element of a float tensor equals its counterpart in ``other`` (a tensor it broadcasts with, or
    a number written as text) up to rounding: computed apart, two such values may compare either way."""
    if not isinstance(t, torch.Tensor) or not t.numel():
        return False
    if not isinstance(other, torch.Tensor):
        try:
            other = torch.tensor(int(other) if str(other).lstrip("-").isdigit() else float(other))
        except (TypeError, ValueError):  # a name not bound in this space (a shape read), or not a number
            return False
    if not (t.is_floating_point() or other.is_floating_point()):
        return False
    try:
        gap = (t.detach().double() - other.detach().double()).abs()
    except RuntimeError:  # (shapes that do not broadcast on this call)
        return False
    scale = 1 + torch.maximum(t.detach().double().abs(), other.detach().double().abs())
    return bool((gap <= max(rounding(t), rounding(other)) * scale).any())


def near_ties(t: torch.Tensor) -> bool:
    """Whether two elements of a float tensor are equal up to rounding (a LayerNorm over two values gives -1, 1)."""
    if not t.is_floating_point() or t.numel() < 2:
        return False
    values = t.detach().double().flatten().sort().values
    gaps = values[1:] - values[:-1]
    return bool((gaps <= rounding(t) * (1 + values[1:].abs())).any())
