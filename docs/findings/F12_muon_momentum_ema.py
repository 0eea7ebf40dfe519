"""F12: torch.optim.Muon's momentum is an exponential average; its docstring documents a sum.

Documented: B_t = mu B_{t-1} + g_t (Nesterov input g_t + mu B_t). The code does buf.lerp_(grad, 1 - mu),
so momentum_buffer is (1 - mu) B_t. Newton-Schulz divides its input by max(||X||, eps), so the
parameters agree unless that eps clamp is active (tiny gradients): then the update differs too.
Exit 1 while momentum_buffer is (1 - mu) times the documented B_2, 0 once it is B_2.
"""
import sys

import torch

mu = 0.95
g1, g2 = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64), torch.tensor([[-1.0, 0.5, 2.0]], dtype=torch.float64)
p = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
opt = torch.optim.Muon([p], momentum=mu)
for g in (g1, g2):
    p.grad = g.clone()
    opt.step()
buf, documented = opt.state[p]["momentum_buffer"], mu * g1 + g2
print(f"momentum_buffer {buf.tolist()}; documented B_2 {documented.tolist()}; ratio "
      f"{(buf / documented)[0, 0].item():.4g}")

# with the eps clamp active the update itself differs: the same tiny gradient, scaled by 1 / (1 - mu)
# as the documented sum would be, gives another step
steps = []
for scale in (1.0, 1 / (1 - mu)):
    q = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    q.grad = torch.tensor([[1e-5, 2e-5, -3e-5]], dtype=torch.float64) * scale
    torch.optim.Muon([q], lr=1.0, weight_decay=0.0, nesterov=False, eps=1e-3).step()
    steps.append(q.detach().abs().max().item())
print(f"tiny gradient, eps=1e-3: step with torch's EMA input {steps[0]:.4g}, with the documented sum's {steps[1]:.4g}")
if abs((buf / documented)[0, 0].item() - 1) > 1e-9:
    sys.exit("F12 present: Muon's momentum buffer is an EMA, not the documented sum")
print("F12 absent")
