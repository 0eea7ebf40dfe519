"""F19: torch.optim.Adafactor's default eps1 (None) comes from the first parameter's dtype, for the whole group.

Documented: eps1=None means torch.finfo(dtype).eps of the parameter. The code sets it from the first tensor
it handles in the group and keeps it, so with float32 and float64 parameters in one group one of them is
clamped with the other's eps (for-loop: the group's first parameter; foreach: the first of its dtype
buckets). Gradients of 1e-10 (g*g = 1e-20: above float64 eps**2, below float32's): a float64 parameter
alone moves to 0.99; after a float32 one in the same group it moves to 0.99999.
Exit 1 while the float64 parameter's step depends on its neighbour, 0 otherwise.
"""
import sys

import torch


def step(dtypes):
    params = [torch.nn.Parameter(torch.ones(4, dtype=dt)) for dt in dtypes]
    for p in params:
        p.grad = torch.full_like(p, 1e-10)
    torch.optim.Adafactor(params, foreach=False).step()
    return params[-1][0].item()


alone, after_f32 = step([torch.float64]), step([torch.float32, torch.float64])
print(f"float64 parameter alone: {alone:.6g}; after a float32 one in its group: {after_f32:.6g} (documented: equal)")
if abs(alone - after_f32) > 1e-9:
    sys.exit("F19 present: Adafactor's eps1 comes from the group's first dtype")
print("F19 absent")
