"""F66: pytorch-optimizer 4.1.0's Muon writes its Nesterov interpolation into the caller's gradient.

torch.optim's optimizers never write to ``p.grad``; torch.optim.Muon computes the Nesterov direction out of place
(``grad.lerp(buf, momentum)``). pytorch-optimizer's Muon (``MuonBase._momentum_updates``:
``torch._foreach_lerp_(grads, buffers, weight=momentum)``, with ``nesterov=True``, its default) computes it in the
gradient tensors themselves: after ``step()`` the caller's ``p.grad`` holds ``lerp(g, momentum_buffer, momentum)``,
not the gradient it gave. A training loop that clips, logs or accumulates gradients after ``step()`` (or steps
twice on one backward) reads other numbers. Exit 1 while the gradient changes, 0 otherwise; 2 when
pytorch-optimizer is not installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import Muon
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)

torch.manual_seed(0)
p = torch.nn.Parameter(torch.randn(8, 4))
opt = Muon([{"params": [p], "use_muon": True}])
for step in range(2):
    g = torch.randn(8, 4)
    p.grad = g.clone()
    opt.step()
    changed = not torch.equal(p.grad, g)
    print(f"step {step + 1}: p.grad after step() {'differs from' if changed else 'equals'} the gradient given "
          f"(max |difference| {(p.grad - g).abs().max().item():.3g})")
theirs = torch.optim.Muon([torch.nn.Parameter(torch.randn(8, 4))])
q = theirs.param_groups[0]["params"][0]
q.grad = torch.randn(8, 4)
given = q.grad.clone()
theirs.step()
print(f"torch.optim.Muon leaves it as given: {torch.equal(q.grad, given)}")
if changed:
    print("F66 present: pytorch-optimizer's Muon wrote into the caller's p.grad", file=sys.stderr)
sys.exit(1 if changed else 0)
