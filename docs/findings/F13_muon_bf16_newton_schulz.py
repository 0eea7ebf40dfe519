"""F13: torch.optim.Muon runs Newton-Schulz in bfloat16 whatever the parameter dtype (undocumented).

_zeropower_via_newtonschulz starts with grad.bfloat16(); the docstring does not say so. A float64
parameter's update then carries ~1 bfloat16 eps (2**-7) of relative error against the same iteration in float64.
Exit 1 while the update is more than 1e-4 relative off a float64 Newton-Schulz, 0 otherwise.
"""
import sys

import torch


def ns64(x, eps=1e-7, a=3.4445, b=-4.7750, c=2.0315):  # torch's iteration, in float64
    tall = x.size(0) > x.size(1)
    x = x.T if tall else x
    x = x / x.norm().clamp(min=eps)
    for _ in range(5):
        A = x @ x.T
        x = a * x + (b * A + c * A @ A) @ x
    return x.T if tall else x


torch.manual_seed(0)
p0 = torch.randn(16, 4, dtype=torch.float64)
p = p0.clone().requires_grad_()
p.grad = torch.randn(16, 4, dtype=torch.float64)
torch.optim.Muon([p], lr=0.01, weight_decay=0.0, nesterov=False, momentum=0.0).step()
update = (p0 - p.detach()) / (0.01 * 2.0)  # adjusted lr: lr * sqrt(16 / 4)
exact = ns64(p.grad)
rel = ((update - exact).abs().max() / exact.abs().max()).item()
print(f"update vs float64 Newton-Schulz: {rel:.3g} relative = {rel / torch.finfo(torch.bfloat16).eps:.2f} "
      f"bfloat16 eps (the docstring names no precision)")
if rel > 1e-4:
    sys.exit("F13 present: Muon's Newton-Schulz runs in bfloat16 for a float64 parameter")
print("F13 absent")
