"""F14: torch.optim.Muon, bfloat16 parameters, nesterov=False: Newton-Schulz normalizes the momentum buffer.

With nesterov=False the update is the buffer itself, grad.bfloat16() returns the same tensor when it is
already bfloat16, and Newton-Schulz's in-place div_ normalizes the buffer. Documented (torch's EMA
convention): after one step buf = (1 - 0.9) * g = 0.2 everywhere. Fix proposed in PyTorch PR #194664.
Exit 1 while the bfloat16 buffer is not 0.2, 0 otherwise.
"""
import sys

import torch

bufs = {}
for dtype in (torch.float32, torch.bfloat16):
    p = torch.zeros(3, 5, dtype=dtype, requires_grad=True)
    p.grad = torch.full((3, 5), 2.0, dtype=dtype)
    opt = torch.optim.Muon([p], nesterov=False, momentum=0.9)
    opt.step()
    bufs[dtype] = opt.state[p]["momentum_buffer"][0, 0].item()
    print(f"{str(dtype):15} momentum_buffer[0, 0] = {bufs[dtype]:.6g} (documented: 0.2)")
if abs(bufs[torch.bfloat16] - 0.2) > 0.01:
    sys.exit("F14 present: Muon normalizes its own bfloat16 momentum buffer")
print("F14 absent")
