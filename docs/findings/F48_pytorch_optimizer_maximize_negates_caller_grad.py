"""F48: pytorch-optimizer 4.1.0 negates the caller's gradient in place under maximize=True.

torch.optim never writes to p.grad; pytorch-optimizer's ``BaseOptimizer.maximize_gradient`` does ``grad.neg_()`` on
``p.grad`` itself, so after ``step()`` a user who clips, logs or accumulates gradients reads their negation. Lion
shown here; every optimizer of the library that calls ``maximize_gradient`` on ``p.grad`` does the same. Exit 1
while the gradient comes back negated, 0 otherwise; 2 when pytorch-optimizer is not installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import Lion
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)

found = False
for maximize in (False, True):
    p = torch.nn.Parameter(torch.ones(4))
    p.grad = torch.tensor([1.0, -2.0, 3.0, -4.0])
    given = p.grad.clone()
    Lion([p], lr=1e-3, maximize=maximize).step()
    same = torch.equal(p.grad, given)
    print(f"maximize={maximize}: p.grad after step() = {p.grad.tolist()} (given {given.tolist()}): "
          f"{'unchanged' if same else 'CHANGED'}")
    found |= maximize and not same
if found:
    print("F48 present: step(maximize=True) negated the caller's gradient in place", file=sys.stderr)
sys.exit(1 if found else 0)
