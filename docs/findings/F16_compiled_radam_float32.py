"""F16: a torch.compile'd RAdam step at float32 computes its rectification from the float32 step tensor.

Eager RAdam computes rho_t and r_t in Python floats (double); under torch.compile `step` is a float32
tensor, and just above the rectification threshold (rho_t ~ 5, step 6) sqrt(rho_t - 4) amplifies its
rounding. Both float32 runs are compared with the same optimizer in float64. Documented/expected: the
compiled float32 run as close to float64 as the eager float32 run (here ~1 float32 eps).
Exit 1 while the compiled run is more than 100 float32 eps off, 0 otherwise.
"""
import sys

import torch

gen = torch.Generator().manual_seed(0)
p0 = torch.randn(4096, generator=gen) * 0.02
grads = [torch.randn(4096, generator=gen) * 10 ** (torch.rand(1, generator=gen).item() * 10 - 8) for _ in range(10)]


def run(dtype, compiled):
    torch._dynamo.reset()
    p = torch.nn.Parameter(p0.to(dtype))
    opt = torch.optim.RAdam([p], foreach=False)
    step = torch.compile(opt.step) if compiled else opt.step
    for g in grads:
        p.grad = g.to(dtype)
        step()
    return p.detach().double()


exact = run(torch.float64, False)
errs = {}
for compiled in (False, True):
    err = (run(torch.float32, compiled) - exact).abs().max() / exact.abs().max()
    errs[compiled] = err.item() / torch.finfo(torch.float32).eps
    print(f"float32 {'compiled' if compiled else 'eager'} vs float64 after 10 steps: {errs[compiled]:.3g} float32 eps")
if errs[True] > 100:
    sys.exit("F16 present: the compiled RAdam step loses float32 precision at the rectification threshold")
print("F16 absent")
