"""F44: fused CUDA Adam and AdamW take 1 - beta2 as 1 - float32(beta2): exp_avg_sq's new term is 1.3e-5 too small.

Adam's second moment is v_t = beta2 v_{t-1} + (1 - beta2) g^2. At step 1, v_0 = 0, so v_1 = (1 - beta2) g^2 exactly
(to the rounding of one product). The for-loop and foreach steps compute 1 - beta2 in double and round it once;
the fused CUDA kernel rounds beta2 = 0.999 to float32 first (0.99900001287...), and 1 - that is 0.00099998713: the
new term, and so v at every step, is 1.29e-5 relatively small (about 108 float32 eps), and the update follows it.
Exit 1 while fused differs from (1 - beta2) g^2 by more than 4 eps, 0 otherwise; 2 without CUDA.
"""
import sys

import torch

if not torch.cuda.is_available():
    print("cannot run: needs a CUDA device", file=sys.stderr)
    sys.exit(2)

beta2 = 0.999
g = torch.tensor([1.0, -2.0, 3.0, 0.5], device="cuda")
expected = ((1 - beta2) * g.double() ** 2)
eps = torch.finfo(torch.float32).eps
worst = {}
for cls in (torch.optim.Adam, torch.optim.AdamW):
    for label, how in (("for-loop", {"foreach": False}), ("foreach", {"foreach": True}), ("fused", {"fused": True})):
        p = torch.nn.Parameter(torch.zeros(4, device="cuda"))
        opt = cls([p], lr=1e-3, betas=(0.9, beta2), **how)
        p.grad = g.clone()
        opt.step()
        v = opt.state[p]["exp_avg_sq"].double()
        err = ((v - expected).abs() / expected).max().item() / eps
        worst[(cls.__name__, label)] = err
        print(f"{cls.__name__:5s} {label:8s}: exp_avg_sq after step 1 is {err:7.1f} float32 eps from (1 - beta2) g^2")
found = any(err > 4 for (_, how), err in worst.items() if how == "fused")
if found:
    print("F44 present: fused CUDA Adam/AdamW compute 1 - beta2 from a float32 beta2", file=sys.stderr)
sys.exit(1 if found else 0)
