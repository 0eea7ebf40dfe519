"""F10: torch.optim.Rprop tests the sign of grad * prev computed in the parameter's dtype.

Documented: if g_{t-1} * g_t > 0 the step size is multiplied by etaplus (1.2). When the product underflows
to 0 (float16: |grad * prev| < ~3e-8; float32: < ~7e-46) neither branch is taken and the step size stays.
Here the same positive gradient twice: both elements' step size should become 0.01 * 1.2 = 0.012.
Exit 1 while the tiny-gradient element keeps 0.01, 0 once both grow.
"""
import sys

import torch

stuck = False
for dtype, tiny in ((torch.float16, 1e-4), (torch.float32, 1e-23)):
    p = torch.nn.Parameter(torch.zeros(2, dtype=dtype))
    opt = torch.optim.Rprop([p], lr=0.01, foreach=False)
    for _ in range(2):
        p.grad = torch.tensor([tiny, 1.0], dtype=dtype)
        opt.step()
    sizes = opt.state[p]["step_size"].tolist()
    stuck |= abs(sizes[0] - 0.012) > 1e-3
    print(f"{str(dtype):14} grad {tiny:g} twice: step_size {sizes} (documented: both 0.012)")
if stuck:
    sys.exit("F10 present: Rprop's sign test underflows")
print("F10 absent")
