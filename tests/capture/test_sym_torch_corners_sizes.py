"""torch.Size with symbolic sizes (concatenation, comparison, containment), finfo/iinfo, in-place ops on literals."""

import pytest
import torch
from torch_corners import run_both

import dynajit.capture as capture
from dynajit.capture.testing import CompileCounter


def size_ops(x):
    s = x.shape
    return (
        x.reshape(s[:1] + s[1:]),
        s + (1,),  # noqa: RUF005 (Size + tuple is what is tested)
        torch.Size([2]) + s,
        (4,) + s,  # noqa: RUF005
        s[0:2],
        s.numel(),
        s == (2, 3),
        s != (1, 1),
        tuple(s) == s,
        s == [2, 3],
        3 in s,
        7 not in s,
        x.new_zeros(s[1:]),
        x.view(s[0] * s[-1]),
    )


def info(x):
    fi = torch.finfo(x.dtype)
    ii = torch.iinfo(torch.int8)
    return x.clamp(fi.min, fi.max) + fi.eps + ii.max + fi.tiny, fi.bits, ii.min, fi.dtype


def literals(y):
    x = 1
    x += y
    x *= y
    z = 2.0
    z -= y.sum()
    n = y.shape[0]
    n += 1
    n //= 2
    return x, z, n, y.new_ones(n)


def compiled_dynamic(fn):
    capture.reset()
    counter = CompileCounter()
    return capture.optimize(counter, fullgraph=True, dynamic=True)(fn), counter


def test_size_operations_with_symbolic_sizes():
    compiled, counter = compiled_dynamic(size_ops)
    for shape in ((2, 3), (5, 4), (6, 5)):
        x = torch.randn(shape)
        got, want = compiled(x), size_ops(x)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                torch.testing.assert_close(g, w)
            else:
                assert type(g) is type(w) and g == w, (g, w)
    # (2, 3) compares equal to the tuples and holds 3: its own entry; then one entry for sizes that do not.
    assert counter.frame_count == 2
    # finfo/iinfo of a known dtype fold, and in-place operators on numbers rebind them (as before).
    run_both(info, lambda: (torch.randn(3),), graphs=1, fullgraph=True)
    run_both(literals, lambda: (torch.randn(5),), graphs=1, fullgraph=True)
    compiled, counter = compiled_dynamic(literals)
    for n in (5, 8, 9):
        y = torch.randn(n)
        got, want = compiled(y), literals(y)
        for g, w in zip(got, want):
            if isinstance(w, torch.Tensor):
                torch.testing.assert_close(g, w)
            else:
                assert g == w, (g, w)
    assert counter.frame_count == 1


def new_from_sizes(x):
    # Tensor.new reads a torch.Size as a shape and a tuple or list as data.
    made = (x.new(x.shape), torch.Tensor.new(x, x.shape[1:]), x.new(torch.Size([2, 1])), x.new((5, 8)), x.new([5]))
    return [t.fill_(1.5) * 2 for t in made]


@pytest.mark.parametrize("dynamic", [False, True])
def test_new_takes_a_size_as_a_shape_and_a_tuple_as_data(dynamic):
    capture.reset()
    compiled = capture.optimize(CompileCounter(), fullgraph=True, dynamic=dynamic)(new_from_sizes)
    for shape in ((2, 3), (4, 5)):
        x = torch.randn(shape, dtype=torch.float64)
        for got, want in zip(compiled(x), new_from_sizes(x), strict=True):
            torch.testing.assert_close(got, want)
