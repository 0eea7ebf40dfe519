"""F70: pytorch-optimizer 4.1.0's RAdam ignores weight_decay when weight_decouple=False.

Its docstring: "weight_decouple: Apply weight decay to parameters instead of adding it to the gradient", so
weight_decouple=False is the L2 mode, wd p added to the gradient (torch.optim.RAdam's default). RAdam's per-parameter
path calls ``apply_weight_decay(p, grad=None, ...)``, whose L2 branch needs a gradient, and its foreach path applies
decay only ``if group['weight_decouple']``: with weight_decouple=False no decay is applied at all, silently. Shown on
both paths (foreach, the default, and per parameter), against weight_decay=0. Exit 1 while weight_decay has no effect,
0 otherwise; 2 when pytorch-optimizer is not installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import RAdam
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)

found = []
for foreach in (None, False):
    final = {}
    for wd in (0.0, 0.5):
        p = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))
        opt = RAdam([p], lr=1e-2, weight_decay=wd, weight_decouple=False, degenerated_to_sgd=True, foreach=foreach)
        for _ in range(8):
            p.grad = torch.tensor([1.0, -2.0, 3.0, -4.0], dtype=torch.float64)
            opt.step()
        final[wd] = p.detach().clone()
    same = torch.equal(final[0.0], final[0.5])
    print(f"RAdam(weight_decouple=False, foreach={foreach}), 8 steps: weight_decay=0.5 -> {final[0.5].tolist()}, "
          f"weight_decay=0 -> {final[0.0].tolist()}: {'IDENTICAL (no decay applied)' if same else 'differ'}")
    if same:
        found.append(f"foreach={foreach}")
if found:
    print(f"F70 present: RAdam(weight_decouple=False) ignores weight_decay ({'; '.join(found)})", file=sys.stderr)
sys.exit(1 if found else 0)
