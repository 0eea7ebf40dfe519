"""F12: torch.optim.Muon's docstring: B_t = mu*B_{t-1} + g_t and Nesterov input g_t + mu*B_t.
Its code (_single_tensor_muon): buf.lerp_(grad, 1 - mu); update = grad.lerp(buf, mu)  -> an EMA,
so state['momentum_buffer'] = (1 - mu) * B_t, and the NS input is (1 - mu) * (documented input).
NS divides by max(||X||_F, eps), so the scale cancels unless the eps clamp is active; then the param
update differs too."""
import torch

mu = 0.95
g1, g2 = (torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64),
          torch.tensor([[-1.0, 0.5, 2.0]], dtype=torch.float64))
p = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
opt = torch.optim.Muon([p], momentum=mu)
for g in (g1, g2):
    p.grad = g.clone()
    opt.step()
documented_B2 = mu * g1 + g2
print("torch buf      :", opt.state[p]["momentum_buffer"].tolist())
print("documented B_2 :", documented_B2.tolist(), " ratio torch/doc =",
      (opt.state[p]["momentum_buffer"] / documented_B2).tolist())

# the eps clamp makes the param update differ: tiny gradient, eps=1e-3, nesterov=False, wd=0
def ns(x, eps, a=3.4445, b=-4.7750, c=2.0315):  # float64 NS, same steps as torch's (no bf16)
    x = x / x.norm().clamp(min=eps)
    for _ in range(5):
        A = x @ x.T
        x = a * x + (b * A + c * A @ A) @ x
    return x
g = torch.tensor([[1e-4, 2e-4, -3e-4]], dtype=torch.float64)
p = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
opt = torch.optim.Muon([p], lr=1.0, weight_decay=0.0, nesterov=False, eps=1e-3)
p.grad = g.clone()
opt.step()
print("torch update      :", (-p.detach()).tolist())
print("documented NS(g)  :", ns(g, 1e-3).tolist(), "(float64; torch's bf16 NS adds ~2**-8 noise)")
print("torch == NS((1-mu) g):", ns((1 - mu) * g, 1e-3).tolist())
