"""F03: a torch.compile'd Adam step computes its bias corrections in float32 for float64 parameters.

Documented (and what eager does): bias corrections 1 - beta ** step from the step count as a Python float
(double). Under torch.compile `optimizer._get_value` returns the float32 `step` tensor, so 1 - beta2 ** step
is float32 and float64 parameters move ~1e-7 relative off the eager step (~1e8 float64 eps).
Exit 1 while compiled and eager differ by more than 1e4 float64 eps, 0 once they agree to rounding.
"""
import sys

import torch

torch.manual_seed(0)
p0, g = torch.randn(64, dtype=torch.float64), torch.randn(64, dtype=torch.float64)
finals = []
for compiled in (False, True):
    torch._dynamo.reset()
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.Adam([p], lr=0.01, foreach=False)
    p.grad = g.clone()
    (torch.compile(opt.step) if compiled else opt.step)()
    finals.append(p.detach())
err = ((finals[1] - finals[0]).abs().max() / (torch.finfo(torch.float64).eps * finals[0].abs().max())).item()
print(f"step dtype {opt.state[p]['step'].dtype}; compiled vs eager after 1 step: {err:.3g} float64 eps "
      f"(documented: ~1)")
if err > 1e4:
    sys.exit("F03 present: the compiled step's bias corrections are float32")
print("F03 absent: compiled matches eager")
