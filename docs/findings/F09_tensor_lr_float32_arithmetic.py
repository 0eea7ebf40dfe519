"""F09: a Tensor lr (float32, as torch's own tests build it) makes float64 steps compute their step size in float32.

Documented: lr may be a Tensor; the step is the same as with the same value as a Python float. Measured:
the for-loop Adamax computes clr = lr / bias_correction, and Adagrad clr = lr / (1 + (step - 1) * lr_decay),
as float32 tensors even for float64 parameters (~1e5 float64 eps after 10 steps).
Exit 1 while Tensor lr and float lr differ by more than 100 float64 eps, 0 once they agree.
"""
import sys

import torch

lr_t = torch.tensor(0.001)  # float32 0-dim
worst = 0.0
for cls, kw in ((torch.optim.Adamax, {}), (torch.optim.Adagrad, {"lr_decay": 0.5})):
    finals = []
    for lr in (lr_t, lr_t.item()):  # the same number, as a Tensor and as a Python float
        g = torch.Generator().manual_seed(1)
        p = torch.nn.Parameter(torch.randn(100, dtype=torch.float64, generator=g))
        opt = cls([p], lr=lr, foreach=False, **kw)
        for _ in range(10):
            p.grad = torch.randn(100, dtype=torch.float64, generator=g)
            opt.step()
        finals.append(p.detach())
    err = ((finals[0] - finals[1]).abs().max() / finals[1].abs().max()).item() / 2**-52
    worst = max(worst, err)
    print(f"{cls.__name__} {kw}: Tensor lr vs float lr after 10 steps: {err:.3g} float64 eps (documented: 0)")
if worst > 100:
    sys.exit("F09 present: a Tensor lr makes float64 steps compute their step size in float32")
print("F09 absent")
