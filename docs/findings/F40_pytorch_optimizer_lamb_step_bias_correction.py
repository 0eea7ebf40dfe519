"""F40: pytorch-optimizer 4.1.0's Lamb, at its defaults, divides the step by 1 - beta1^t after the trust ratio.

Its docstring: "The default update follows version 3 of the paper without bias correction." LAMB's trust ratio
makes the relative update of each tensor lr (||x_t+1 - x_t|| / ||x_t|| = lr, phi(z) = z, v3 or the final paper's
bias-corrected Algorithm 2 alike, where the corrections cancel in the ratio). pytorch-optimizer's default
(adam_debias=False) divides the step size by 1 - beta1^t after the ratio: 10 lr at step 1 with beta1 = 0.9.
Exit 1 while the default step is inflated, 0 otherwise; 2 when pytorch-optimizer is not installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import Lamb
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)

for adam_debias in (False, True):
    x = torch.nn.Parameter(torch.full((4,), 0.5, dtype=torch.float64))  # ||x|| = 1, under the clamp at 10
    opt = Lamb([x], lr=1e-3, adam_debias=adam_debias)
    x.grad = torch.tensor([1.0, -2.0, 3.0, -4.0], dtype=torch.float64)
    before = x.detach().clone()
    opt.step()
    relative = ((x.detach() - before).norm() / before.norm()).item()
    print(f"adam_debias={adam_debias}: relative update at step 1 = {relative:.6g} (LAMB: lr = 0.001)")
    if not adam_debias:
        found = relative > 2e-3
if found:
    print("F40 present: the default step is 1 / (1 - beta1) = 10 times LAMB's at step 1", file=sys.stderr)
sys.exit(1 if found else 0)
