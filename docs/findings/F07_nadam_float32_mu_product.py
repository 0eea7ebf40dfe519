"""F07: torch.optim.NAdam keeps mu_product as a float32 tensor for float64 parameters.

mu_product is created with _get_scalar_dtype() and multiplied in float32; both NAdam step sizes come from
it. Documented: mu_product = prod_i mu_i, at the parameters' precision.
Exit 1 while mu_product is off its float64 value by more than 1e3 float64 eps, 0 otherwise.
"""
import sys

import torch

p = torch.nn.Parameter(torch.ones(4, dtype=torch.float64))
opt = torch.optim.NAdam([p], lr=0.01, foreach=False)
documented = 1.0
for t in range(1, 11):
    p.grad = torch.ones(4, dtype=torch.float64)
    opt.step()
    documented *= 0.9 * (1 - 0.5 * 0.96 ** (t * 0.004))
mu = opt.state[p]["mu_product"]
rel = abs(mu.item() - documented) / documented
print(f"mu_product after 10 steps {mu.item()!r} ({mu.dtype}); documented {documented!r}: {rel / 2**-52:.3g} "
      f"float64 eps off")
if rel > 1e3 * 2**-52:
    sys.exit("F07 present: NAdam's mu_product is float32 for float64 parameters")
print("F07 absent")
