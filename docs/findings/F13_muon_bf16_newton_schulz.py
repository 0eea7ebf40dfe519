"""F13: torch.optim.Muon runs Newton-Schulz in bfloat16 (grad.bfloat16()) whatever the param dtype, which the
class docstring does not say: at float64 params the update carries ~2**-8 relative error, i.e. ~1e11-1e13
float64 eps of the parameter after a few steps (review comment by ngimel on pytorch#160213 raised it)."""
import torch

torch.manual_seed(0)
def ns64(x, eps=1e-7, a=3.4445, b=-4.7750, c=2.0315):
    tall = x.size(0) > x.size(1)
    x = x.T if tall else x
    x = x / x.norm().clamp(min=eps)
    for _ in range(5):
        A = x @ x.T
        x = torch.addmm(x, torch.addmm(A, A, A, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x
p = torch.randn(16, 4, dtype=torch.float64, requires_grad=True)
p0 = p.detach().clone()
g = torch.randn(16, 4, dtype=torch.float64)
opt = torch.optim.Muon([p], lr=0.01, weight_decay=0.0, nesterov=False, momentum=0.0)
p.grad = g
opt.step()
upd_torch = (p0 - p.detach()) / (0.01 * 2.0)  # adjusted lr = lr * sqrt(16/4)
upd_64 = ns64(g)
rel = ((upd_torch - upd_64).abs().max() / upd_64.abs().max()).item()
print(f"update rel err {rel:.3e} = {rel / 2**-7:.2f} bf16 eps = {rel / 2**-52:.3e} float64 eps")
print("param err in float64 eps (one step):",
      ((p.detach() - (p0 - 0.02 * upd_64)).abs().max() / p0.abs().max() / 2**-52).item())
