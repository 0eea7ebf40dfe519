"""F45: capturable Adam on CUDA steps float64 parameters with float32 bias corrections.

With capturable=True the step counter lives on the device as a float32 tensor (torch's default dtype), and the
bias corrections 1 - beta^t are computed from it on the device, in float32: a float64 parameter's update is off by
about float32's rounding (1e-7 relative), some 1e8 float64 eps. The non-capturable step computes them in double on
the host. At float32 Adam and AdamW show it too: 1 - beta2**t from float32 beta2 (0.999 -> 0.99900001) is 1.3e-5
relatively off at t=1, so the first update is about 54 float32 eps of itself off. Exit 1 while capturable and
non-capturable differ by more than 4 float64 eps of the update at float64, or 16 float32 eps at float32; 0 otherwise;
2 without CUDA.
"""
import sys

import torch

if not torch.cuda.is_available():
    print("cannot run: needs a CUDA device", file=sys.stderr)
    sys.exit(2)

g = torch.tensor([1e-3, -2e-2, 3e-1, 0.5], device="cuda", dtype=torch.float64)
found = False
for cls in (torch.optim.Adam, torch.optim.AdamW, torch.optim.NAdam, torch.optim.RAdam, torch.optim.Adamax):
    moved = {}
    for capturable in (False, True):
        p = torch.nn.Parameter(torch.ones(4, device="cuda", dtype=torch.float64))
        opt = cls([p], lr=1e-2, capturable=capturable)
        for _ in range(7):  # RAdam's rectified update starts after step 5
            p.grad = g.clone()
            opt.step()
        moved[capturable] = 1 - p.detach()
    err = ((moved[True] - moved[False]).abs().max() / moved[False].abs().max()).item() / torch.finfo(torch.float64).eps
    found |= err > 4
    print(f"{cls.__name__:7s}: capturable's float64 displacement after 7 steps is {err:.3g} float64 eps of it from "
          f"the host-scalar step's")
for cls in (torch.optim.Adam, torch.optim.AdamW):  # float32: one step from zero, so the displacement is the update
    moved = {}
    for capturable in (False, True):
        p = torch.nn.Parameter(torch.zeros(4, device="cuda"))
        opt = cls([p], lr=1e-2, capturable=capturable)
        p.grad = g.float()
        opt.step()
        moved[capturable] = p.detach().clone()
    err = ((moved[True] - moved[False]).abs() / moved[False].abs()).max().item() / torch.finfo(torch.float32).eps
    found |= err > 16
    print(f"{cls.__name__:7s}: capturable's float32 first update is {err:.3g} float32 eps of it from the host-scalar "
          f"step's")
if found:
    print("F45 present: capturable steps float64 parameters with float32 step arithmetic", file=sys.stderr)
sys.exit(1 if found else 0)
