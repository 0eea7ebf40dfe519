"""F25: with differentiable=True, Adam and AdamW compute their bias corrections in float32 for float64 parameters.

The differentiable (and capturable) path evaluates 1 - beta ** step on the float32 `step` state where the
default path uses a Python float. At step 1, 1 - 0.999 in float32 is 9.99987e-4, so float64 parameters move
6.6e-6 relative off the documented step (m_hat = g, sqrt(v_hat) = |g|: update -lr * g / (|g| + eps)).
Exit 1 while the differentiable update is more than 1e-9 relative off, 0 otherwise.
"""
import sys

import torch

torch.manual_seed(0)
p0, g = torch.randn(1000, dtype=torch.float64), torch.randn(1000, dtype=torch.float64)
documented = -1e-3 * g / (g.abs() + 1e-8)
worst = 0.0
for name in ("Adam", "AdamW"):
    for differentiable in (False, True):
        p = p0.clone().requires_grad_() if differentiable else torch.nn.Parameter(p0.clone())
        q = p.clone() if differentiable else p  # a differentiable step runs on a non-leaf
        q.grad = g.clone()
        getattr(torch.optim, name)([q], differentiable=differentiable, weight_decay=0.0, foreach=False).step()
        rel = ((q.detach() - p0 - documented).abs().max() / documented.abs().max()).item()
        worst = max(worst, rel) if differentiable else worst
        print(f"{name} differentiable={differentiable}: update {rel:.3g} relative off the documented step")
if worst > 1e-9:
    sys.exit("F25 present: differentiable Adam/AdamW bias corrections are float32")
print("F25 absent")
