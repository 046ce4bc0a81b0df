"""A generated program as data: statements, arguments and call sizes, rendered to a standalone Python script.

The generator builds a :class:`Program`; the runner executes its rendered
source; the shrinker edits its statement tree (dropping statements, taking
one branch of an ``if``, simpler right-hand sides) and renders again. A
rendered program is self-contained: ``fn`` (the function under test), any
module-level helpers, ``CALLS`` (the symbolic sizes of each call) and
``make_args(sizes, seed)`` (the inputs of one call, deterministic), so a
failure prints as a script anyone can run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

HEADER = """import collections
import collections.abc

import torch
import dynajit.capture
import dynajit.compiler


class Window(collections.abc.Sequence):
    \"\"\"A view over a list: each item is read from the list when a loop asks for it.\"\"\"

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


# A float dtype's bits read as the int of its size, looked up by dtype as casting tables do.
BITS = {torch.float32: torch.int32, torch.float64: torch.int64}


def brk(value):
    # The value itself, after a graph break: in a call's arguments, the callee and the arguments before it
    # cross the break (a tensor's bound method among them).
    print(end="")
    return value

"""

# The classes of a ``state`` argument (the ``objects`` feature, see objects.py).
STATE_SOURCE = '''
class Box:
    """Reads go through a Python __getattribute__ mapping aliases, as transformers' configs do."""

    aliases = {"value": "t"}

    def __init__(self, origin, t):
        self.origin = origin
        self.t = t

    def __getattribute__(self, name):
        if name != "aliases" and name in super().__getattribute__("aliases"):
            name = super().__getattribute__("aliases")[name]
        return super().__getattribute__(name)


class State:
    def __init__(self, base, shared=False):
        self.a = base
        self.n = 1
        self.items = [base * 2, base + 1]
        # shared: one list under two names; apart, an equal list, which no guard on its contents tells from it
        self.counts = [1, 2]
        self.more = self.counts if shared else [1, 2]
        self.boxes = [Box(0, base - 1), Box(1, base * 3)]
        self.d = {"k": Box(2, base.abs()), "w": base * -1}

    def snapshot(self):
        """Every attribute's value; a box as its origin and its attributes (where each box ended up)."""

        def snap(value):
            if isinstance(value, Box):
                # no strings among the leaves: a standalone repro compares snapshots with assert_close
                return {"box origin": value.origin, "attrs": {k: snap(v) for k, v in sorted(vars(value).items()) if k != "origin"}}
            if isinstance(value, (list, tuple)):
                return [snap(v) for v in value]
            if isinstance(value, dict):
                return {k: snap(v) for k, v in value.items()}
            return value

        return {k: snap(v) for k, v in sorted(vars(self).items())}
'''


# The grad mode each call of a program with the ``ambient_modes`` feature is made in: ``ambient(call)``.
AMBIENT_SOURCE = """
AMBIENT = {"grad": torch.enable_grad, "no_grad": torch.no_grad, "inference": torch.inference_mode}


def ambient(call):
    return AMBIENT[MODE_CALLS[call]]()
"""

# A program with the ``layouts`` feature fixes what inductor-lite's channels-last pass decides by timing and peak
# memory (whether an inference graph's 2-D convolutions run channels-last, and its pointwise ones as matrix products), so both
# sides of each decision are fuzzed and a repro decides as its run did. The runner restores the timings after.
LAYOUT_SOURCE = """
import dynajit.inductor_lite._layout as _layout_pass


def _forced_conv_seconds(timing, memory_format):
    timing.prepared(memory_format)  # (decides the matrix products in channels-last)
    return 1.0 if (memory_format == torch.channels_last) == LAYOUT["channels_last"] else 2.0


def _forced_seconds(fn, args):
    return (1.0 if LAYOUT["matmuls"] else 3.0) if fn is _layout_pass._run_as_matmul else 2.0


def _forced_peak_bytes(graph, outputs, held_while_running):
    return 0  # (the peak-memory rule would keep the fuzzer's tiny images in their layout)


_layout_pass._conv_seconds, _layout_pass._seconds = _forced_conv_seconds, _forced_seconds
_layout_pass._peak_bytes = _forced_peak_bytes
"""

# The module-level state a program with the ``changed_facts`` feature reads (see facts.py).
FACTS_SOURCE = """
class Facts:
    def __init__(self):
        self.table = {}


FACTS = Facts()
K = 0

# A module tree whose shape the facts change: its two layers' weights tied or not, and an extra parameter
# registered on some calls only. Built the same in every run: its values come from linspace, not a seed.
NET = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)).requires_grad_(False)
for _i, _p in enumerate(NET.parameters()):
    _p.copy_(torch.linspace(0, 1, _p.numel()).view(_p.shape) * (_i + 1))  # (sums differ: a tie shows)
UNTIED = NET[1].weight
EXTRA = torch.nn.Parameter(torch.full((1,), 3.0), requires_grad=False)


class ScaledByK(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * K

    @staticmethod
    def backward(ctx, grad):
        return grad * (K + 1)


class ScaledByFacts(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * FACTS.scale

    @staticmethod
    def backward(ctx, grad):
        return grad * (FACTS.scale - 1)


def set_facts(call):
    global K
    f = FACT_CALLS[call]
    K = f["K"]
    FACTS.flag, FACTS.scale = f["flag"], f["scale"]
    FACTS.table.clear()
    FACTS.table.update(dict.fromkeys(f["keys"], 1))
    if f["extra"] is None:
        FACTS.__dict__.pop("extra", None)
    else:
        FACTS.extra = f["extra"]
    if f["training"] is not None and "MODS" in globals():
        MODS.train(f["training"])
    NET[1].weight = NET[0].weight if f.get("tied") else UNTIED
    if f.get("extra_param"):
        NET[0].extra = EXTRA
    else:
        NET[0]._parameters.pop("extra", None)
"""


@dataclass
class Stmt:
    """One statement of a body: plain lines, or a compound statement whose clauses hold nested bodies.

    Attributes:
        lines: the source lines of a simple statement (relative indentation), empty for a compound one.
        clauses: ``(header, body)`` pairs of a compound statement (``if ...:`` / ``else:``, ``for ...:``,
            ``def ...:``), rendered in order.
        alts: simpler replacements the shrinker may try (each a list of statements), besides dropping.
    """

    lines: list[str] = field(default_factory=list)
    clauses: list[tuple[str, list[Stmt]]] = field(default_factory=list)
    alts: list[list[Stmt]] = field(default_factory=list)

    def render(self, indent: str) -> list[str]:
        """The statement's source lines, indented by ``indent``."""
        if not self.clauses:
            return [indent + line for line in self.lines]
        out = [indent + line for line in self.lines]
        for header, body in self.clauses:
            out.append(indent + header)
            rendered = render_body(body, indent + "    ")
            out.extend(rendered or [indent + "    pass"])
        return out


def render_body(body: list[Stmt], indent: str) -> list[str]:
    """The lines of a statement list at ``indent``."""
    return [line for stmt in body for line in stmt.render(indent)]


@dataclass
class ArgSpec:
    """One argument of ``fn``: a tensor (``dims`` are ints or size-symbol names), a Python int, or a ``State``
    (``kind == "state"``: the object of :data:`STATE_SOURCE` built around a float32 tensor of ``dims``).

    ``layout`` is ``contiguous``, ``transposed`` (made as the transpose of a contiguous tensor), ``strided``
    (every other row of a tensor twice as long), ``offset`` (rows of a longer tensor, starting at a row that
    changes from call to call) or ``piece`` (the second of two stacked tensors: a piece of ``unbind`` on even
    calls, a ``select`` of the same layout on odd ones, which autograd lets be written in place), so inputs need
    not be dense, nor start where their storage does, nor be views of one kind. ``grad``: a float
    tensor built from a leaf that requires grad (a clone of it, so in-place ops on it are allowed, as on any
    activation); ``make_args`` records the leaves in ``LEAVES``.
    """

    name: str
    kind: str  # "tensor", "int" or "state"
    dtype: str = "float32"
    dims: list[int | str] = field(default_factory=list)
    layout: str = "contiguous"
    int_values: list[int] = field(default_factory=list)  # one per call, for kind == "int"
    shared: list[bool] = field(default_factory=list)  # per call, for kind == "state": ``more`` is ``counts``
    grad: bool = False
    specials: bool = False  # NaN, infinities and signed zeros at random places (a float tensor)

    def construction(self, call_var: str) -> str:
        """The expression building this argument inside ``make_args`` (``s`` holds the sizes, ``g`` the RNG)."""
        if self.kind == "int":
            return f"INTS[{self.name!r}][{call_var}]"
        dims = [d if isinstance(d, int) else f"s[{d!r}]" for d in self.dims]
        if self.kind == "state":
            shared = f", {self.shared!r}[{call_var}]" if any(self.shared) else ""
            return f"State(torch.randn(({''.join(f'{d}, ' for d in dims)}), generator=g){shared})"
        if self.layout == "transposed" and len(dims) >= 2:
            dims[-1], dims[-2] = dims[-2], dims[-1]
        elif self.layout == "strided" and dims:
            dims[0] = f"2 * {dims[0]}"
        rows = dims[0] if dims else None
        if self.layout == "offset" and dims:
            dims[0] = f"{dims[0]} + 2"
        elif self.layout == "piece":
            dims.insert(0, 2)
        shape = "(" + "".join(f"{d}, " for d in dims) + ")"
        if self.dtype in ("float32", "float64"):
            expr = f"torch.randn({shape}, generator=g, dtype=torch.{self.dtype})"
        elif self.dtype in ("bfloat16", "float16"):
            expr = f"torch.randn({shape}, generator=g).to(torch.{self.dtype})"
        elif self.dtype == "int64":
            expr = f"torch.randint(-4, 5, {shape}, generator=g)"
        else:
            expr = f"torch.randint(0, 2, {shape}, generator=g).bool()"
        if self.specials:
            expr = f"specials({expr}, g)"
        if self.grad:
            expr = f"leaf({expr})"
        if self.layout == "transposed" and len(dims) >= 2:
            expr += ".mT"
        elif self.layout == "strided" and dims:
            expr += "[::2]"
        elif self.layout == "offset" and rows is not None:
            expr += f".narrow(0, {call_var} % 3, {rows})"
        elif self.layout == "piece":
            expr = f"piece({expr}, {call_var})"
        return expr


PIECE_SOURCE = """
def piece(t, call):
    # One layout, two kinds of view: autograd refuses in-place ops on a piece of unbind of a tensor requiring grad.
    return t.unbind(0)[1] if call % 2 == 0 else t[1]
"""


SPECIALS_SOURCE = """
def specials(t, g):
    values = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0], dtype=torch.float64)
    flat = t.view(-1)
    if flat.numel():
        places = torch.randint(0, flat.numel(), (max(1, flat.numel() // 6),), generator=g)
        flat[places] = values[torch.randint(0, len(values), places.shape, generator=g)].to(t.dtype)
    return t
"""


@dataclass
class Program:
    """A generated program: helpers, the body of ``fn``, what it returns, its arguments and its calls."""

    seed: str
    args: list[ArgSpec]
    calls: list[dict[str, int]]
    helpers: list[list[Stmt]] = field(default_factory=list)  # each one module-level ``def``
    body: list[Stmt] = field(default_factory=list)
    returns: list[str] = field(default_factory=list)
    return_style: str = "tuple"  # tuple, list, dict or single
    dynamic: bool | None = None  # compile(..., dynamic=): None is automatic dynamic shapes
    modules: list[str] = field(default_factory=list)  # constructors of the modules in ``MODS`` (``fn`` calls them)
    module_grads: bool = True  # whether the modules' parameters require grad
    facts: list[dict[str, Any]] = field(default_factory=list)  # per call, what ``set_facts`` sets (none: no facts)
    modes: list[str] = field(default_factory=list)  # per call, the grad mode it is made in (none: as the caller's)
    layout: dict[str, bool] = field(default_factory=dict)  # the layout decisions forced (none: timed as usual)

    def copy(self) -> Program:
        """A deep copy (the shrinker edits copies)."""
        return dataclasses.replace(
            self,
            args=[
                dataclasses.replace(a, dims=list(a.dims), int_values=list(a.int_values), shared=list(a.shared))
                for a in self.args
            ],
            calls=[dict(c) for c in self.calls],
            helpers=[_copy_body(h) for h in self.helpers],
            body=_copy_body(self.body),
            returns=list(self.returns),
            modules=list(self.modules),
            facts=[dict(f) for f in self.facts],
            modes=list(self.modes),
            layout=dict(self.layout),
        )

    def return_line(self) -> str:
        """The ``return`` statement of ``fn``."""
        items = self.returns
        if not items:
            return "return None"
        if self.return_style == "single":
            return f"return {items[0]}"
        if self.return_style == "list":
            return "return [" + ", ".join(items) + "]"
        if self.return_style == "dict":
            return "return {" + ", ".join(f"{'r' + str(i)!r}: {item}" for i, item in enumerate(items)) + "}"
        return "return (" + "".join(f"{item}, " for item in items) + ")"

    def module_lines(self) -> list[str]:
        """The definition of ``MODS``, the modules ``fn`` calls, built from a fixed seed, and of the facts
        ``fn`` reads (none of either: no lines)."""
        lines = []
        if self.modules:
            lines += ["torch.manual_seed(0)", "MODS = torch.nn.ModuleList(["]
            lines += [f"    {constructor}," for constructor in self.modules]
            lines += ["])" if self.module_grads else "]).requires_grad_(False)", ""]
        if self.facts:
            lines += [*FACTS_SOURCE.strip("\n").splitlines(), "", f"FACT_CALLS = {self.facts!r}", ""]
        if self.layout:
            lines += [f"LAYOUT = {self.layout!r}", *LAYOUT_SOURCE.strip("\n").splitlines(), "", ""]
        return lines

    @property
    def takes_state(self) -> bool:
        """Whether an argument is a ``State`` (the program then defines its classes)."""
        return any(a.kind == "state" for a in self.args)

    def source(self) -> str:
        """The program as a module: header, helpers, ``fn``, ``CALLS``, ``INTS`` and ``make_args``."""
        lines = [HEADER]
        if self.takes_state:
            lines.append(STATE_SOURCE)
        for helper in self.helpers:
            lines.extend(render_body(helper, ""))
            lines.append("")
        lines.extend(self.module_lines())
        params = ", ".join(a.name for a in self.args)
        lines.append(f"def fn({params}):")
        lines.extend(render_body(self.body, "    "))
        lines.append("    " + self.return_line())
        lines.append("")
        lines.append(f"CALLS = {self.calls!r}")
        ints = {a.name: a.int_values for a in self.args if a.kind == "int"}
        lines.append(f"INTS = {ints!r}")
        if self.modes:
            lines += ["", f"MODE_CALLS = {self.modes!r}", *AMBIENT_SOURCE.strip("\n").splitlines()]
        lines.append("")
        lines.append("")
        lines.append("LEAVES = []  # the tensors requiring grad that make_args built last")
        lines.append("")
        lines.append("")
        lines.append("def leaf(t):")
        lines.append("    LEAVES.append(t.requires_grad_())")
        lines.append("    return t.clone()")
        lines.append("")
        lines.append("")
        if any(a.specials for a in self.args):
            lines += [*SPECIALS_SOURCE.strip("\n").splitlines(), "", ""]
        if any(a.layout == "piece" for a in self.args):
            lines += [*PIECE_SOURCE.strip("\n").splitlines(), "", ""]
        lines.append("def make_args(s, call):")
        lines.append("    g = torch.Generator().manual_seed(call)")
        lines.append("    LEAVES.clear()")
        if self.facts:
            lines.append("    set_facts(call)")
        lines.extend(f"    {a.name} = {a.construction('call')}" for a in self.args)
        lines.append(f"    return [{params}]")
        return "\n".join(lines) + "\n"


def _copy_body(body: list[Stmt]) -> list[Stmt]:
    return [
        Stmt(
            lines=list(s.lines),
            clauses=[(h, _copy_body(b)) for h, b in s.clauses],
            alts=[_copy_body(a) for a in s.alts],
        )
        for s in body
    ]


REPRO_FOOTER = """

def snapshots(args):
    return [a.snapshot() if hasattr(a, "snapshot") else a for a in args]


def storages(out, args):
    # Per output tensor, the input whose memory it shares, else which of the outputs' own memories it is in
    # (outputs sharing memory get the same label), as the fuzzer compares them; empty tensors share nothing.
    inputs = [a.untyped_storage().data_ptr() for a in args if isinstance(a, torch.Tensor)]
    own, labels = [], []
    for t in torch.utils._pytree.tree_leaves(out):
        if not isinstance(t, torch.Tensor) or not t.numel():
            labels.append(None)
            continue
        ptr = t.untyped_storage().data_ptr()
        if ptr in inputs:
            labels.append(("input", inputs.index(ptr)))
            continue
        own.append(ptr) if ptr not in own else None
        labels.append(("output", own.index(ptr)))
    return labels


def identities(out, args):
    # Per output tensor, the input or the earlier output it is (the same object), as the fuzzer compares them.
    leaves = torch.utils._pytree.tree_leaves(out)
    return [
        next((("input", k) for k, a in enumerate(args) if a is t), None)
        or next((("output", j) for j in range(i) if leaves[j] is t), None)
        if isinstance(t, torch.Tensor) else None
        for i, t in enumerate(leaves)
    ]


def grads(out, leaves):
    # The leaves' gradients after a backward of the outputs that require grad, each weighted by fixed noise.
    outs = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves or not outs:
        return None
    g = torch.Generator().manual_seed(0)
    sum((t * torch.randn(t.shape, generator=g, dtype=t.dtype)).sum() for t in outs).backward()
    return [leaf.grad for leaf in leaves]


def detached(out):
    return torch.utils._pytree.tree_map(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, out)


def autograd_states(out):
    leaves = torch.utils._pytree.tree_leaves(out)
    return [(t.requires_grad, t.is_inference()) for t in leaves if isinstance(t, torch.Tensor)]


def process_state():
    # What the call leaves in its caller's block: grad and inference modes, default dtype, the global generator.
    rng = torch.random.get_rng_state()
    return torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.get_default_dtype(), hash(rng.numpy().tobytes())


def _run(f, call):
    args = make_args(CALLS[call], call)
    leaves = list(LEAVES) + list(MODS.parameters() if "MODS" in globals() else [])
    for leaf in leaves:
        leaf.grad = None
    torch.manual_seed(call)
    with ambient(call) if "ambient" in globals() else torch.enable_grad():
        try:
            result = f(*args)
        except Exception as e:  # the comparison is of the exception type
            result = e
        return args, result, leaves, process_state()


if __name__ == "__main__":
    import copy
    import warnings

    warnings.simplefilter("error", RuntimeWarning)  # a fallback to eager is a failure too
    compiled = dynajit.compiler.compile(fn, backend={backend!r}{dynamic})
    for call in range(len(CALLS)):
        # The modules' state before the call (BatchNorm's running statistics): eager and compiled start from it.
        before = copy.deepcopy(MODS.state_dict()) if "MODS" in globals() else None
        eager_args, expected, eager_leaves, eager_process = _run(fn, call)
        expected_grads = grads(expected, eager_leaves) if not isinstance(expected, Exception) else None
        eager_state = copy.deepcopy(MODS.state_dict()) if before is not None else None
        if before is not None:
            MODS.load_state_dict(before)
        compiled_args, actual, compiled_leaves, compiled_process = _run(compiled, call)
        print(f"call {{call}} sizes {{CALLS[call]}}:\\n  eager:    {{expected!r}}\\n  compiled: {{actual!r}}")
        assert compiled_process == eager_process, (compiled_process, eager_process)
        if isinstance(expected, Exception) or isinstance(actual, Exception):
            assert type(expected) is type(actual), (type(expected), type(actual))
            continue
        torch.testing.assert_close(detached(actual), detached(expected), equal_nan=True, rtol=1e-3, atol=1e-3)
        assert autograd_states(actual) == autograd_states(expected), (autograd_states(actual), autograd_states(expected))
        torch.testing.assert_close(snapshots(compiled_args), snapshots(eager_args), equal_nan=True, rtol=1e-3, atol=1e-3)
        {extra}
        if before is not None:
            torch.testing.assert_close(dict(MODS.state_dict()), dict(eager_state), rtol=1e-3, atol=1e-3, equal_nan=True)
        actual_grads = grads(actual, compiled_leaves)
        if expected_grads is not None and actual_grads is not None:  # a compiled graph's unreached input: zeros
            actual_grads = [
                None if e is None and a is not None and not a.count_nonzero() else a
                for e, a in zip(expected_grads, actual_grads)
            ]
        torch.testing.assert_close(actual_grads, expected_grads, equal_nan=True, rtol=1e-3, atol=1e-3)
"""

# Extra checks of the standalone repro, by failure kind (the generic ones above cover the rest).
REPRO_EXTRA = {
    "stride": (
        "for e, a in zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(actual)):\n"
        "            if isinstance(e, torch.Tensor):\n"
        "                assert e.stride() == a.stride() or e.numel() <= 1, (e.stride(), a.stride())"
    ),
    "alias": (
        "assert storages(expected, eager_args) == storages(actual, compiled_args), "
        "(storages(expected, eager_args), storages(actual, compiled_args))"
    ),
    "identity": (
        "assert identities(expected, eager_args) == identities(actual, compiled_args), "
        "(identities(expected, eager_args), identities(actual, compiled_args))"
    ),
    "input_metadata": (
        "for e, a in zip(eager_args, compiled_args):\n"
        "            if isinstance(e, torch.Tensor):\n"
        "                assert (e.shape, e.stride()) == (a.shape, a.stride()), (e.shape, e.stride(), a.shape, a.stride())"
    ),
}


def repro_script(program: Program, backend: str, kind: str) -> str:
    """``program`` as a standalone script that compiles ``fn`` with ``backend`` and checks every call."""
    extra = REPRO_EXTRA.get(kind, "pass")
    dynamic = "" if program.dynamic is None else f", dynamic={program.dynamic}"
    return program.source() + REPRO_FOOTER.format(backend=backend, extra=extra, dynamic=dynamic)
