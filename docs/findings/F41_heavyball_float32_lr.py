"""F41: heavyball 3.2.1 steps float64 parameters with a learning rate rounded to float32.

BaseOpt computes each step's (warmup-scheduled) learning rate as ``base_lr * step / step.clamp(...)``, ``step`` an
int64 tensor: the result is a tensor of torch's default dtype, float32, whatever the parameters' dtype, so a float64
parameter moves by float32(lr) * update, even with ``storage_dtype="float64"``. At step 1 AdamW's update is
sign(g) (m_hat = g, v_hat = g^2), so the parameter must move by exactly lr. Exit 1 while the step is float32(lr),
0 otherwise; 2 when heavyball is not installed.
"""
import sys

import torch

try:
    import heavyball
except ImportError:
    print("cannot run: heavyball is not installed", file=sys.stderr)
    sys.exit(2)

lr = 1e-3
x = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
opt = heavyball.AdamW([x], lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, storage_dtype="float64")
x.grad = torch.tensor([1.0, -2.0, 3.0, -4.0], dtype=torch.float64)
opt.step()
moved = x.detach().abs()
error = (moved - lr).abs().max().item() / (lr * torch.finfo(torch.float64).eps)
print(f"|x_1 - x_0| = {moved[0].item()!r} (lr = {lr!r}, float32(lr) = {float(torch.tensor(lr)):.17g}): "
      f"{error:.3g} float64 eps of the step off")
found = error > 4
if found:
    print("F41 present: the float64 parameter stepped with the float32-rounded learning rate", file=sys.stderr)
sys.exit(1 if found else 0)
