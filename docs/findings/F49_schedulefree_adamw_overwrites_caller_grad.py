"""F49: schedulefree 1.4.1's AdamWScheduleFree overwrites the caller's gradient with the normalized step.

torch.optim never writes to p.grad; AdamWScheduleFree reuses the gradient's memory ("Reuse grad buffer for memory
efficiency": ``grad.div_(denom)``, then ``add_(y, alpha=weight_decay)``), so after ``step()`` p.grad holds
g / (sqrt(v_hat) + eps) (+ weight_decay * y), not the gradient. The maintainers say so in an issue and point to
``AdamWScheduleFreeReference``, which keeps it; the class's docstring does not. pytorch-optimizer 4.1.0's port,
``ScheduleFreeAdamW``, does the same (``grad.div_(de_nom)``; ``torch._foreach_div_(grads, de_noms)`` on its foreach
path), undocumented. Exit 1 while either overwrites the gradient, 0 otherwise; 2 when schedulefree is not installed.
"""
import sys

import torch

try:
    from schedulefree import AdamWScheduleFree, AdamWScheduleFreeReference
except ImportError:
    print("cannot run: schedulefree is not installed", file=sys.stderr)
    sys.exit(2)

try:
    from pytorch_optimizer import ScheduleFreeAdamW
except ImportError:
    ScheduleFreeAdamW = None

found = False
for cls in (AdamWScheduleFree, AdamWScheduleFreeReference, ScheduleFreeAdamW):
    if cls is None:
        continue
    p = torch.nn.Parameter(torch.ones(4))
    opt = cls([p], lr=1e-3)
    opt.train()
    p.grad = torch.tensor([1.0, -2.0, 3.0, -4.0])
    given = p.grad.clone()
    opt.step()
    same = torch.equal(p.grad, given)
    print(f"{cls.__name__}: p.grad after step() = {[round(v, 4) for v in p.grad.tolist()]} (given "
          f"{given.tolist()}): {'unchanged' if same else 'CHANGED'}")
    found |= cls is not AdamWScheduleFreeReference and not same
if found:
    print("F49 present: a Schedule-Free AdamW's step() overwrote the caller's gradient", file=sys.stderr)
sys.exit(1 if found else 0)
