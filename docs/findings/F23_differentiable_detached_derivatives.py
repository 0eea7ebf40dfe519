"""F23: with differentiable=True, SGD's first momentum buffer and ASGD's Tensor lr are detached from autograd.

Documented: SGD's buffer starts as b_1 = g_1 (+ weight_decay * p_0), so with momentum the first update is
-lr * b_1 and d p_1 / d g_1 = -lr. torch creates it with ``grad.detach().clone()``: the derivative through the
buffer is zero (and with weight decay, d p_1 / d p_0 misses -lr * weight_decay). ASGD copies a Tensor lr into its
``eta`` state with ``.clone().detach()`` and reads it with ``.item()``, so d p / d lr is None.
"""

import torch

torch.manual_seed(0)


def sgd_first_step(**options):
    p0 = torch.randn(4, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, dtype=torch.float64, requires_grad=True)
    p = p0.clone()  # not a leaf: the differentiable step runs on autograd's graph
    opt = torch.optim.SGD([p], lr=0.1, differentiable=True, **options)
    p.grad = g
    opt.step()
    d_grad, d_param = torch.autograd.grad(p.sum(), [g, p0], allow_unused=True)
    return d_grad, d_param


for options in ({}, {"momentum": 0.9}, {"momentum": 0.9, "weight_decay": 0.5}):
    d_grad, d_param = sgd_first_step(**options)
    print(f"SGD {options}: d p1/d g1 = {None if d_grad is None else d_grad.tolist()} (documented: -0.1 each); "
          f"d p1/d p0 = {d_param.tolist()} (documented: {1 - 0.1 * options.get('weight_decay', 0.0):g} each)")

p0 = torch.randn(4, dtype=torch.float64)
g = torch.randn(4, dtype=torch.float64)
lr = torch.tensor(0.01, dtype=torch.float64, requires_grad=True)
p = p0.clone().requires_grad_()
q = p.clone()
opt = torch.optim.ASGD([q], lr=lr, lambd=1e-4, differentiable=True)
q.grad = g
opt.step()
(d_lr,) = torch.autograd.grad(q.sum(), [lr], allow_unused=True)
print(f"ASGD: d p1/d lr = {d_lr} (documented: sum(-lambd * p0 - g) = {float((-1e-4 * p0 - g).sum()):.6g})")
