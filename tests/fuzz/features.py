"""The generator's switches: one per language or tensor feature, so a feature with a known open bug can be excluded.

Every field is on by default. The CI budget (``test_fuzz.py``) and the CLI
(``--disable a,b``) turn some off; a feature excluded from the CI budget
must name the failure class that forces it out, next to the exclusion.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Features:
    """What generated programs may contain (each ``True`` by default)."""

    pointwise: bool = True  # unary/binary math, comparisons, where, clamp, python scalars
    reductions: bool = True  # sum/mean/amax/argmax/max(dim)/median/std/any/cumsum/softmax, dim and keepdim,
    # kthvalue/cummax/cummin/logcumsumexp, nansum/nanmean/count_nonzero/aminmax/var_mean
    reduce_size_one: bool = True  # reductions of tensors with a size-1 dimension or a single element
    views: bool = True  # view/reshape/flatten/unsqueeze/squeeze/transpose/permute/movedim/unflatten
    slices: bool = True  # basic indexing with offsets and steps, select, narrow, chunk/split/unbind
    expand: bool = True  # expand/expand_as/broadcast_to and broadcasting between different shapes
    matmul: bool = True  # @, mm, bmm, matmul, linear
    cat: bool = True  # cat/stack
    creation: bool = True  # zeros_like/ones/arange/full sized from other tensors' shapes
    indexing: bool = True  # advanced indexing: boolean masks, index tensors, gather, index_select
    dtypes: bool = True  # int64/bool/float64 arguments and casts (dtype promotion)
    half_dtypes: bool = True  # bfloat16/float16 arguments and casts, compared within their own precision
    special_values: bool = True  # float arguments holding NaN, infinities and signed zeros, in some programs
    random: bool = True  # draws of the global generator (rand, randn, randint, randperm, bernoulli), in float32
    # whatever the operands' dtype (a float64 twin draws the same numbers), seeded alike before each run
    model_ops: bool = True  # what models add: masked_fill, tril, flip/roll/repeat/pad, einsum/addmm, sdpa, topk, ...
    inplace_input: bool = True  # add_/mul_/copy_/index assignment on the arguments themselves
    inplace_view: bool = True  # in-place ops on views of arguments (mutating the argument through the view)
    inplace_local: bool = True  # in-place ops on tensors the function made
    scalar_copy: bool = True  # copy_ from a Python number (x.copy_(3)); off: fill_ instead
    self_inplace: bool = True  # an in-place op whose operand is its target (x.copy_(x), x.add_(x))
    overlapping_inplace: bool = True  # in-place ops on tensors whose elements share memory (expand results)
    mutate_aliased: bool = True  # in-place ops on a tensor while another local views the same memory
    inplace_metadata: bool = True  # t_/unsqueeze_/squeeze_ (metadata mutation)
    zero_size: bool = True  # size symbols may be 0 on some calls
    size_one: bool = True  # size symbols may be 1 on some calls (and constant 1 dims)
    zero_dim: bool = True  # 0-dim tensor arguments
    new_sizes: bool = True  # later calls use new sizes (recompiles)
    dynamic_shapes: bool = True  # compile with automatic dynamic shapes; off: dynamic=False (static recompiles)
    noncontiguous_inputs: bool = True  # transposed and strided arguments
    int_arg: bool = True  # a Python int argument whose value changes between calls
    big_ints: bool = True  # with int_arg, a last call whose int no narrower dtype holds (2**31, 70000; int64's
    # bounds and past them): eager converts some numbers checked, and a symbolic int is an int64
    shape_control: bool = True  # if/else on shapes, dims, dtypes and constants
    data_branch: bool = True  # if on tensor values (x.sum() > 0), .item()/float()/int() of tensors
    containers: bool = True  # lists, tuples and dicts built, indexed, unpacked, appended; with graph_breaks,
    # comprehensions whose element breaks, and locals a closure reads rebound after a break
    loops: bool = True  # for loops over ranges, lists, unbind, enumerate and dict items; over reversed(), zip(),
    # enumerate() and named iterators whose lists the body changes or advances (`live_iterator`)
    helpers: bool = True  # calls of module-level helper functions
    nested_helpers: bool = True  # nested defs (closures over locals) and their calls
    graph_breaks: bool = True  # print(end="") and dynajit.capture.graph_break()
    call_breaks: bool = True  # a graph break while a call's arguments are evaluated (``x.view(brk(shape))``,
    # ``brk`` a helper that breaks): the callee, a tensor's bound method among them, crosses the break
    contexts: bool = True  # no_grad/enable_grad/inference_mode/autocast(bfloat16) blocks, a break inside some
    aliasing: bool = True  # r = x; x = f(x): locals aliasing arguments and rebinding
    objects: bool = True  # a State argument (attributes, lists, dicts, boxes) read and rewritten, compared after
    shared_objects: bool = True  # on some calls the State's list ``more`` is its list ``items``: one object, two names
    return_views: bool = True  # returning arguments, views of arguments and containers
    exceptions: bool = True  # try/except around a step raising on some calls' sizes (index, view, n // (n - k)),
    # sometimes with a break inside, an else or a finally
    errors: bool = True  # a last statement that raises on some call (eager and compiled must agree)
    autograd: bool = True  # float arguments requiring grad; a backward after each call, the leaves' grads compared
    ambient_modes: bool = True  # calls made under no_grad or inference_mode, per call; outputs' autograd state compared
    changed_facts: bool = True  # a global int, a module-level object's attributes and dict keys, modules' train
    # mode, read by the program and by autograd Functions' methods, and changed between calls: guards must see
    # every fact a trace read
    modules: bool = True  # calls of nn modules (Linear, LayerNorm, BatchNorm, Conv1d/2d, Embedding) held in a global
    layouts: bool = True  # inductor-lite's channels-last and matrix-product decisions forced per program (LAYOUT)

    @classmethod
    def names(cls) -> list[str]:
        """Every feature name."""
        return [f.name for f in dataclasses.fields(cls)]

    def without(self, *names: str) -> Features:
        """These features with ``names`` switched off (unknown names are an error)."""
        unknown = sorted(set(names) - set(self.names()))
        if unknown:
            raise ValueError(f"unknown fuzz features {unknown}; known: {', '.join(self.names())}")
        return dataclasses.replace(self, **dict.fromkeys(names, False))

    def only(self, *names: str) -> Features:
        """Only ``names`` switched on."""
        return Features().without(*self.names()).with_(*names)

    def with_(self, *names: str) -> Features:
        """These features with ``names`` switched on."""
        unknown = sorted(set(names) - set(self.names()))
        if unknown:
            raise ValueError(f"unknown fuzz features {unknown}; known: {', '.join(self.names())}")
        return dataclasses.replace(self, **dict.fromkeys(names, True))


# Features off in the CI budget, each with the failure class it currently hits (remove the entry when fixed).
CI_EXCLUDED: dict[str, str] = {}
