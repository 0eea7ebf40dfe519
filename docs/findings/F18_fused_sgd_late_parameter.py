"""F18: fused SGD with momentum raises when a parameter gets its first gradient after the others.

_fused_sgd treats a step as the first only when every momentum buffer is None; a parameter that joins
later (a layer unfrozen after some steps) has a None buffer beside existing ones and the kernel receives
None. Documented (and what the for-loop and foreach steps do): its buffer starts at its first gradient.
Exit 1 while the fused step raises TypeError, 0 otherwise.
"""
import sys

import torch

failed = False
for variant in ({"foreach": False}, {"fused": True}):
    a, b = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([a, b], lr=0.1, momentum=0.9, **variant)
    a.grad = torch.ones(3)
    opt.step()  # b has no gradient yet
    a.grad, b.grad = torch.ones(3), torch.ones(3)
    try:
        opt.step()
        print(f"{variant}: ok, b = {b[0].item():.3g} (documented: 0.9)")
    except TypeError as exc:
        failed = True
        print(f"{variant}: TypeError: {exc} (documented: b = 0.9)")
if failed:
    sys.exit("F18 present: fused SGD raises when a parameter gets its first gradient late")
print("F18 absent")
