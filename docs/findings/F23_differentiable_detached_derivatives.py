"""F23: with differentiable=True, SGD's first momentum buffer and ASGD's Tensor lr are detached from autograd.

Documented: SGD's buffer starts as b_1 = g_1, the update is -lr * b_1, so d p_1 / d g_1 = -lr. torch creates it
with grad.detach().clone(): the derivative through it is missing (None). ASGD copies a Tensor lr into its eta
state with .clone().detach() and reads it with .item(), so d p / d lr is None (documented: sum(-g) here).
Exit 1 while either derivative is missing, 0 otherwise.
"""
import sys

import torch

torch.manual_seed(0)
missing = False
for options in ({}, {"momentum": 0.9}):
    g = torch.randn(4, dtype=torch.float64, requires_grad=True)
    p = torch.randn(4, dtype=torch.float64, requires_grad=True).clone()  # a non-leaf: the step runs on the graph
    p.grad = g
    torch.optim.SGD([p], lr=0.1, differentiable=True, **options).step()
    (d,) = torch.autograd.grad(p.sum(), [g], allow_unused=True)
    missing |= d is None
    print(f"SGD {options}: d p1 / d g1 = {None if d is None else d.tolist()} (documented: -0.1 each)")

lr = torch.tensor(0.01, dtype=torch.float64, requires_grad=True)
q = torch.zeros(4, dtype=torch.float64, requires_grad=True).clone()
q.grad = torch.ones(4, dtype=torch.float64)
torch.optim.ASGD([q], lr=lr, differentiable=True).step()
(d,) = torch.autograd.grad(q.sum(), [lr], allow_unused=True)
missing |= d is None
print(f"ASGD, Tensor lr: d p1 / d lr = {d} (documented: -4.0)")
if missing:
    sys.exit("F23 present: differentiable SGD/ASGD drop derivatives")
print("F23 absent")
