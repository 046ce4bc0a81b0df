"""One value per input for the math functions, whichever generated loop computes it.

g++ runs a vectorised loop's body through libmvec and its remainder, and the loops it does not vectorise,
through the scalar libm; the two round differently. A value compared with its own reduction
(``y == y.amax(-1, keepdim=True)``, the rule amax's and amin's gradients follow) then matched no element
where eager always matches one. Likewise a product and a sum fused into one loop: g++ contracted them into one
fused multiply-add, which rounds once where eager's two kernels round twice. Each case runs eagerly and compiled on
the same inputs, at many sizes.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from dynajit import compiler


def _masks(x):
    y = F.softplus(x.mT)
    return y == y.amin(0, keepdim=True), (y * 3).sin() == (y * 3).sin().amax(-1, keepdim=True)


def _gradient_of_amin(x):
    return F.softplus(x.mT).amin(0, keepdim=True)


def test_a_value_compared_with_its_own_reduction_matches_it_at_every_size():
    compiler.reset()
    compiled = compiler.compile(_masks, backend="inductor", dynamic=True)
    for n in range(2, 40):
        x = torch.randn(n, n, 1, generator=torch.Generator().manual_seed(n))
        for got, want in zip(compiled(x), _masks(x)):
            assert torch.equal(got, want), n


def test_the_gradient_of_amin_goes_to_the_minimum_at_every_size():
    compiler.reset()
    compiled = compiler.compile(_gradient_of_amin, backend="inductor", dynamic=True)
    for n in range(2, 24):
        grads = []
        for f in (_gradient_of_amin, compiled):
            x = torch.randn(n, n, 1, generator=torch.Generator().manual_seed(n)).requires_grad_()
            y = f(x)
            (y * torch.randn(y.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
            grads.append(x.grad)
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-5, atol=1e-6, msg=f"size {n}")


def test_the_gradient_of_a_quotient_of_a_value_by_itself_is_eagers():
    # d(v / v) = g / v - g * ((v / v) / v): eager's two kernels cancel the terms exactly; one fused multiply-add left
    # their rounding, 1e-2 where v is 1e-6, and the Linear before it spread that into its weight's gradient.
    compiler.reset()
    linear = torch.nn.Linear(3, 5)
    with torch.no_grad():
        linear.weight.copy_(torch.randn(5, 3, generator=torch.Generator().manual_seed(0)))
        linear.bias.copy_(torch.randn(5, generator=torch.Generator().manual_seed(1)))

    def ratio(x):
        v = linear(x)
        return v / v

    compiled = compiler.compile(ratio, backend="inductor")
    for seed in range(6):
        x = torch.randn(3, 4, 3, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():  # the first row's outputs a few millionths from 0
            linear.bias.sub_(linear(x)[0, 0] - 2e-6)
        noise = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(100 + seed))
        grads = []
        for fn in (ratio, compiled):
            linear.zero_grad(set_to_none=True)
            (fn(x) * noise).sum().backward()
            grads.append((linear.weight.grad, linear.bias.grad))
        torch.testing.assert_close(grads[1], grads[0], atol=1e-4, rtol=1e-3)
