"""F16: a torch.compile'd RAdam step at float32 computes its rectification from the float32 step tensor.

Eager RAdam computes rho_t and r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))
in Python floats (double); under torch.compile the step is a float32 tensor, so rho_t is float32, and
just above the rectification threshold (rho_t ~ 5, step 6) sqrt(rho_t - 4) amplifies its rounding.
Both float32 runs are compared with the same optimizer run in float64 (eager) on the same inputs.
"""
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
eps = torch.finfo(torch.float32).eps
for compiled in (False, True):
    err = ((run(torch.float32, compiled) - exact).abs().max() / (eps * exact.abs().max())).item()
    print(f"float32 {'compiled' if compiled else 'eager   '} vs float64 eager after 10 steps: {err:.3g} float32 eps")
