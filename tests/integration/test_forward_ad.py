"""Forward-mode AD: a frame called inside ``forward_ad.dual_level()`` gives eager's tangents.

Compiled kernels compute primal values only, so a dual tensor passed through them would come out without its
tangent, silently. Inside a dual level a frame runs in Python instead (GLOBAL_STATE reads the level, so an entry
compiled outside is never used inside, and the frame compiles again once the level is left); under
``fullgraph`` the call raises, naming forward-mode AD. Each case compares the primal values and the tangents
with eager's on the same inputs.
"""

from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from dynajit import compiler
from dynajit.compiler._registry import lookup_backend

BACKENDS = ["inductor", "aot_eager", "eager"]


def sin_matmul(x, w):
    return torch.sin(x) @ w + 1


def softmax_of_a_product(x, w):
    return (x * w.sum()).softmax(-1)


def _counting(backend):
    graphs = []

    def count(gm, example_inputs):
        graphs.append(gm)
        return lookup_backend(backend)(gm, example_inputs)

    return count, graphs


def _with_tangent(fn, x, w, tangent):
    with fwAD.dual_level():
        primal, out_tangent = fwAD.unpack_dual(fn(fwAD.make_dual(x, tangent), w))
        return primal.clone(), out_tangent.clone() if out_tangent is not None else None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [sin_matmul, softmax_of_a_product])
def test_a_dual_tensor_keeps_its_tangent_through_a_compiled_call(backend, fn):
    x, w, tangent = torch.randn(2, 4), torch.randn(4, 3), torch.randn(2, 4)
    count, graphs = _counting(backend)
    compiled = compiler.compile(fn, backend=count)
    # compiled outside the level first: that entry must not answer inside it
    torch.testing.assert_close(compiled(x, w), fn(x, w))
    expected = _with_tangent(fn, x, w, tangent)
    assert expected[1] is not None
    torch.testing.assert_close(_with_tangent(compiled, x, w, tangent), expected)
    torch.testing.assert_close(compiled(x * 2, w), fn(x * 2, w))
    assert len(graphs) == 1  # the frame ran in Python inside the level, and its graph serves again outside


def test_a_module_called_inside_a_dual_level_gives_eager_s_tangent():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8))
    compiled = compiler.compile(model)
    x, tangent = torch.randn(3, 4), torch.randn(3, 4)

    def run(m):
        with fwAD.dual_level():
            primal, out_tangent = fwAD.unpack_dual(m(fwAD.make_dual(x, tangent)))
            return primal.detach().clone(), out_tangent.detach().clone()

    torch.testing.assert_close(run(compiled), run(model))


def test_fullgraph_refuses_a_dual_level_naming_forward_mode_ad():
    from dynajit.capture._frame import Unsupported

    def fresh(x, w):
        return torch.sin(x) @ w

    compiled = compiler.compile(fresh, fullgraph=True)
    with fwAD.dual_level(), pytest.raises(Unsupported, match="forward-mode AD"):
        compiled(fwAD.make_dual(torch.randn(2, 4), torch.randn(2, 4)), torch.randn(4, 3))
