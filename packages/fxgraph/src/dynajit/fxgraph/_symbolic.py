"""Symbolic sizes for example values: fake tensors and ints whose sizes are ShapeEnv symbols.

Capture makes graph inputs symbolic where a dimension is dynamic; backends
(and their tests) read the same fake values back from placeholder metadata.
Each symbol is created under a :class:`SizeName`, the guard-style name of the
value it stands for (``L['x'].size()[0]``), so shape guards print readably.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import sympy
import torch
from torch._guards import GuardSource, Source
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StrictMinMaxConstraint
from torch.utils._sympy.value_ranges import ValueRanges

__all__ = ["SizeName", "is_symbolic", "symbolic_fake", "symbolic_int", "symbols_of"]

DimRange = tuple[int | None, int | None]


@dataclasses.dataclass(frozen=True)
class SizeName(Source):
    """The name of one symbolic value as guards print it (``L['x'].size()[0]``, ``L['n']``)."""

    text: str

    @property
    def _name_template(self) -> str:
        return self.text

    @property
    def guard_source(self) -> GuardSource:  # type: ignore[override]
        return GuardSource.LOCAL


def _symbol(
    shape_env: ShapeEnv,
    value: int,
    name: str,
    bounds: DimRange | None,
    duck: bool,
    zero_one: bool = True,
    positive: bool | None = True,
) -> torch.SymInt | int:
    constraint = None
    if bounds is not None and bounds != (None, None):
        low, high = bounds
        constraint = StrictMinMaxConstraint(
            vr=ValueRanges(low if low is not None else 0, high if high is not None else sympy.oo), warn_only=False
        )
    source = SizeName(name)
    kind = DimDynamic.DUCK if duck and constraint is None else DimDynamic.DYNAMIC
    expr = shape_env.create_symbol(
        value,
        source,
        dynamic_dim=kind,
        constraint_dim=constraint,
        positive=positive,
        do_not_specialize_zero_one=not zero_one,
    )
    return shape_env.create_symintnode(expr, hint=value, source=source)


def symbolic_int(shape_env: ShapeEnv, value: int, name: str, bounds: DimRange | None = None) -> torch.SymInt | int:
    """A SymInt standing for the Python int ``value`` named ``name`` (an int stays an int when 0 or 1).

    Unlike a size, an int may be negative: the symbol's range is all integers (``bounds`` narrow it).
    """
    return _symbol(shape_env, value, name, bounds, duck=False, positive=None)


def symbolic_fake(
    fake_mode: FakeTensorMode,
    value: torch.Tensor,
    name: str,
    dims: Mapping[int, DimRange | None],
    *,
    duck: bool = True,
    specialize_zero_one: bool = True,
) -> torch.Tensor:
    """A fake tensor like ``value`` whose dimensions in ``dims`` are symbols (``dim -> (min, max)`` or None).

    ``name`` is the guard-style name of the tensor (``L['x']``); symbol names
    are ``{name}.size()[{dim}]``. Sizes 0 and 1 stay static, as in
    torch.compile, unless ``specialize_zero_one`` is False (then the symbol's
    range starts at 0: use it with size-oblivious reasoning,
    ``torch.fx.experimental._config.backed_size_oblivious``); with ``duck``
    equal sizes share one symbol. Strides
    follow the value's memory order, so the value must be dense
    (``ValueError`` otherwise: the caller keeps such a tensor static); a
    size-1 dim's stride is the product of the sizes inside it where the
    value's is, and a symbol of its own where not, named
    ``{name}.stride()[{dim}]`` (0 and 1 stay static).
    """
    shape_env = fake_mode.shape_env
    if shape_env is None:
        raise ValueError("symbolic_fake needs a FakeTensorMode created with a ShapeEnv")
    order = _dense_order(value)
    if order is None:
        raise ValueError(f"{name} is not dense in memory (strides {tuple(value.stride())}); it cannot be symbolic")
    sizes: list[torch.SymInt | int] = []
    for dim, size in enumerate(value.shape):
        if dim in dims:
            sizes.append(_symbol(shape_env, size, f"{name}.size()[{dim}]", dims[dim], duck, specialize_zero_one))
        else:
            sizes.append(size)
    strides: list[torch.SymInt | int] = [1] * value.dim()
    running: torch.SymInt | int = 1
    running_value = 1
    for dim in order:  # innermost first
        # A size-1 dim's stride addresses nothing, yet ops read it (a convolution lays its output out by it, a
        # clone copies it): one that is not the product of the dims inside it is a symbol of its own, as a batch
        # of one sliced from a longer sequence has (its stride follows the length before the slice).
        if value.shape[dim] != 1 or value.stride(dim) == running_value:
            strides[dim] = running
        else:
            strides[dim] = _symbol(shape_env, value.stride(dim), f"{name}.stride()[{dim}]", None, duck=False)
        running, running_value = running * sizes[dim], running_value * value.shape[dim]
    # An inference tensor stays one and a normal tensor stays normal, whatever mode the caller is in (a
    # tensor made under inference_mode is an inference tensor; views of it follow, and lose requires_grad).
    with fake_mode, torch.inference_mode(value.is_inference()):
        fake = torch.empty_strided(sizes, strides, dtype=value.dtype, device=value.device)
        if value.requires_grad:
            fake.requires_grad_(True)
            if not value.is_leaf:  # a result of autograd's, as the value: in-place ops on it are allowed
                with torch.enable_grad():
                    fake = fake.clone(memory_format=torch.preserve_format)
    return fake


def _dense_order(value: torch.Tensor) -> list[int] | None:
    """Dimensions from innermost to outermost if ``value`` is dense and non-overlapping, else None."""
    order = sorted(range(value.dim()), key=lambda d: (value.stride(d), value.shape[d]))
    expected = 1
    for dim in order:
        if value.shape[dim] != 1 and value.stride(dim) != expected:
            return None
        expected *= value.shape[dim]
    return order


def is_symbolic(value: object) -> bool:
    """True for a SymInt, or a tensor with a symbolic size."""
    if isinstance(value, torch.SymInt):
        return not isinstance(value.node.expr, sympy.Integer)
    if isinstance(value, torch.Tensor):
        return any(isinstance(s, torch.SymInt) for s in value.shape)
    return False


def reads_data(gm: torch.fx.GraphModule) -> bool:
    """True when a node of ``gm`` has an example value over an unbacked symbol (a value read from tensor data).

    Such a graph must be traced (by AOT autograd) with its placeholders' example values, whose fake mode's
    ShapeEnv knows those symbols, even when every input size is static.
    """
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    shape_envs = set()
    for node in gm.graph.nodes:
        example = node.meta.get("example_value")
        leaves = example if isinstance(example, (tuple, list)) else (example,)
        for leaf in leaves:
            if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool, torch.Tensor)) and free_unbacked_symbols(
                leaf
            ):
                return True
            mode = getattr(leaf, "fake_mode", None)
            if mode is not None and mode.shape_env is not None:
                shape_envs.add(mode.shape_env)
    # A value read from data can leave no symbol behind: `x.new_zeros((n + 1, 4))` of a 0-d tensor `n`
    # whose result is then viewed as `x`'s shape solves its symbol, so every example value is static.
    return any(free_unbacked_symbols(tuple(env.var_to_range)) for env in shape_envs)


def symbols_of(value: object) -> set[sympy.Symbol]:
    """The free symbols in a SymInt or in a tensor's sizes and strides."""
    found: set[sympy.Symbol] = set()
    items: list[object] = [value] if isinstance(value, torch.SymInt) else []
    if isinstance(value, torch.Tensor):
        items = [*value.shape, *value.stride()]
    for item in items:
        if isinstance(item, torch.SymInt):
            found |= item.node.expr.free_symbols
    return found
