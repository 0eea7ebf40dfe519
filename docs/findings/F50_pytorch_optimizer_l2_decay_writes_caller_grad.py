"""F50: pytorch-optimizer 4.1.0 adds the L2 weight decay into the caller's gradient in place.

torch.optim never writes to p.grad; with ``weight_decouple=False`` pytorch-optimizer's
``BaseOptimizer.apply_weight_decay`` does ``grad.add_(p, alpha=weight_decay)`` on ``p.grad`` itself (its foreach twin
``torch._foreach_add_(grads, params, ...)``), so after ``step()`` a user who clips, logs or accumulates gradients reads
g + wd p. AdEMAMix shown at its defaults (weight_decouple=False is its default: any weight_decay > 0 does it) and
AdaBelief with weight_decouple=False, on both of their paths (foreach, the default, and per parameter). Exit 1 while
the gradient comes back changed, 0 otherwise; 2 when pytorch-optimizer is not installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import AdaBelief, AdEMAMix
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)

found = []
cases = [(AdEMAMix, {}), (AdaBelief, {"weight_decouple": False})]
for cls, extra in cases:
    for foreach in (None, False):
        p = torch.nn.Parameter(torch.ones(4))
        p.grad = torch.tensor([1.0, -2.0, 3.0, -4.0])
        given = p.grad.clone()
        cls([p], lr=1e-3, weight_decay=0.5, foreach=foreach, **extra).step()
        same = torch.equal(p.grad, given)
        print(f"{cls.__name__}(weight_decay=0.5, {', '.join(f'{k}={v}' for k, v in extra.items()) or 'defaults'}, "
              f"foreach={foreach}): p.grad after step() = {p.grad.tolist()} (given {given.tolist()}): "
              f"{'unchanged' if same else 'CHANGED (g + wd p)'}")
        if not same:
            found.append(f"{cls.__name__} foreach={foreach}")
if found:
    print(f"F50 present: step() added the L2 decay wd p into the caller's p.grad ({'; '.join(found)})",
          file=sys.stderr)
sys.exit(1 if found else 0)
