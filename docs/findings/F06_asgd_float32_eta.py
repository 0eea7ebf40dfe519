"""F06: torch.optim.ASGD keeps eta and mu as float32 tensors (_get_scalar_dtype) for float64 parameters,
so float64 training uses a float32-rounded step size (~1e8 float64 eps after a few steps)."""
import torch

torch.manual_seed(0)
p0, grads = torch.randn(16, dtype=torch.float64), [torch.randn(16, dtype=torch.float64) for _ in range(3)]
finals = []
for default in (torch.float32, torch.float64):
    torch.set_default_dtype(default)  # _get_scalar_dtype follows the default dtype
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.ASGD([p], lr=0.01, foreach=False)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    print(f"default dtype {default}: eta stored as {opt.state[p]['eta'].dtype}, eta = {opt.state[p]['eta'].item()!r}")
    finals.append(p.detach().clone())
torch.set_default_dtype(torch.float32)
eps = torch.finfo(torch.float64).eps
print("param difference: "
      f"{((finals[0] - finals[1]).abs().max() / (eps * finals[1].abs().max())).item():.3g} float64 eps")
