"""F14: torch.optim.Muon, bfloat16 params, nesterov=False: Newton-Schulz's in-place div_ normalizes the
momentum buffer itself, because grad.bfloat16() returns the same tensor when it is already bf16."""
import torch

torch.manual_seed(0)
for dtype in (torch.float32, torch.bfloat16):
    p = torch.zeros(3, 5, dtype=dtype, requires_grad=True)
    opt = torch.optim.Muon([p], nesterov=False, momentum=0.9)
    g = torch.full((3, 5), 2.0, dtype=dtype)
    p.grad = g
    opt.step()
    buf = opt.state[p]["momentum_buffer"]
    # expected (torch's own EMA convention): lerp(0, g, 1 - 0.9) = 0.1 * g = 0.2 everywhere
    print(dtype, "buf[0,0] =", buf[0, 0].item(), " expected 0.2 ;  ||buf||_F =", buf.float().norm().item())
