"""F06: torch.optim.ASGD keeps eta and mu as float32 tensors for float64 parameters.

`eta` and `mu` are created with _get_scalar_dtype() (float32 unless the default dtype is float64), so a
float64 run uses a float32-rounded step size. Documented: eta_t = lr / (1 + lambd * lr * t) ** alpha,
computed at the parameters' precision. Exit 1 while eta is float32 (off the float64 value), 0 otherwise.
"""
import sys

import torch

p = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))
opt = torch.optim.ASGD([p], lr=0.01, foreach=False)
for _ in range(3):
    p.grad = torch.ones(4, dtype=torch.float64)
    opt.step()
eta = opt.state[p]["eta"]
documented = 0.01 / (1 + 1e-4 * 0.01 * 3) ** 0.75
rel = abs(eta.item() - documented) / documented
print(f"eta {eta.item()!r} ({eta.dtype}); documented {documented!r}: {rel / 2**-52:.3g} float64 eps off")
if rel > 1e3 * 2**-52:
    sys.exit("F06 present: ASGD's eta is float32 for float64 parameters")
print("F06 absent")
