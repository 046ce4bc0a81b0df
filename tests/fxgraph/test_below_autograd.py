"""``running_below_autograd``: a compiled backward's aten calls skip autograd's dispatch layers, values unchanged."""

from __future__ import annotations

import torch
from functorch.compile import aot_function, make_boxed_func

from dynajit.fxgraph import running_below_autograd


def test_a_backward_runs_below_autograd_and_its_gradients_are_eager_s():
    seen = []

    def run_as_is(gm, _inputs):
        return make_boxed_func(gm.forward)

    def backward_noting_dispatch(gm, inputs):
        compiled = run_as_is(gm, inputs)

        def run(args):
            seen.append(torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.ADInplaceOrView))
            return compiled(args)

        run._boxed_call = True
        return run

    def fn(x, w):
        return (x @ w.t()).relu().sum(0)

    compiled = aot_function(fn, run_as_is, running_below_autograd(backward_noting_dispatch))

    def step(f):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).requires_grad_()
        w = torch.randn(5, 4, generator=torch.Generator().manual_seed(1)).requires_grad_()
        out = f(x, w)
        out.backward(torch.arange(5.0))
        return out.detach(), x.grad, w.grad

    torch.testing.assert_close(step(compiled), step(fn))
    assert seen == [True]
    assert not torch._C._dispatch_tls_is_dispatch_key_excluded(torch._C.DispatchKey.ADInplaceOrView)
