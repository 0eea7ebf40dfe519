"""F42: heavyball 3.2.1's debiased beta divides a float64 (1 - beta) by a float32 (1 - beta**step).

utils.beta_debias(beta, step) = 1 - (1 - beta) / (1 - beta**step): called with a Python-float beta and the group's
int64 step tensor (scale_by_exp_avg_sq: SFAdamW, RMSprop; exp_avg: Muon's momentum), beta**step is a float32
tensor (torch's default dtype) while 1 - beta stays a Python float. At step 1 the debiased beta must be 0 (the
second moment is g**2); with beta2 = 0.999 it is -1.29e-5, so SFAdamW's first second moment is g**2 (1 + 1.29e-5),
about 108 float32 eps off, for float32 and float64 parameters alike. The optimizer is built at heavyball's defaults
(storage_dtype="float32", so a float64 parameter's state is float32 too): 108 eps is far above that state's own
rounding. Exit 1 while present, 0 once fixed, 2 when heavyball is not installed.
"""
import sys

import torch

try:
    import heavyball
except ImportError:
    print("cannot run: heavyball is not installed", file=sys.stderr)
    sys.exit(2)

worst = 0.0
for dtype in (torch.float32, torch.float64):
    x = torch.nn.Parameter(torch.zeros(4, dtype=dtype))
    opt = heavyball.SFAdamW([x], lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    g = torch.tensor([1.0, -2.0, 3.0, -4.0], dtype=dtype)
    x.grad = g.clone()
    opt.step()
    v = next(t for k, t in opt.state[x][0].items() if str(k).startswith("scale_by_exp_avg_sq_exp_avg_sq"))
    relative = (v.double() / g.double() ** 2 - 1).abs().max().item()
    worst = max(worst, relative / torch.finfo(torch.float32).eps)
    print(f"{dtype}: second moment after step 1 = g**2 (1 + {relative:.3g}) (documented: g**2)")
found = worst > 4
if found:
    print(f"F42 present: {worst:.3g} float32 eps off at step 1", file=sys.stderr)
sys.exit(1 if found else 0)
