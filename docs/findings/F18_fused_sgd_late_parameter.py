"""F18: fused SGD with momentum raises when a parameter gets its first gradient after the others.

_fused_sgd treats a step as the first only when every momentum buffer is None; a parameter that joins
later (a layer unfrozen after some steps, a branch first taken at step k) has a None buffer next to
existing ones, and the kernel receives None: TypeError. The for-loop and foreach variants handle it.
"""
import torch

for variant in ({"foreach": False}, {"foreach": True}, {"fused": True}):
    a, b = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([a, b], lr=0.1, momentum=0.9, **variant)
    a.grad = torch.ones(3)
    opt.step()  # a gets a momentum buffer; b has no gradient yet
    a.grad, b.grad = torch.ones(3), torch.ones(3)
    try:
        opt.step()
        print(variant, "ok:", b.tolist())
    except TypeError as exc:
        print(variant, "TypeError:", exc)
