"""F11: torch.optim.Rprop clamps the step size to step_sizes also where its docs leave it unchanged.

Documented (Rprop docstring): where g_{t-1} * g_t == 0, eta_t = eta_{t-1} (no clamp). The code clamps on
every step, so with lr outside step_sizes the first step (prev = 0) moves by the clamp, not by lr. Raised
in review when the algorithm was documented (PyTorch #63866: "The code is not equivalent if lr is not inside
step_sizes range") and left as designed. Exit 1 while the first step moves 0.5 instead of lr = 1, 0 otherwise.
"""
import sys

import torch

p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
opt = torch.optim.Rprop([p], lr=1.0, step_sizes=(1e-6, 0.5), foreach=False)
p.grad = torch.ones(1, dtype=torch.float64)
opt.step()
print(f"lr=1, step_sizes=(1e-6, 0.5): first step moved the parameter by {-p.item():g} (documented: 1)")
if -p.item() != 1.0:
    sys.exit("F11 present: Rprop clamps the unchanged-branch step size")
print("F11 absent")
