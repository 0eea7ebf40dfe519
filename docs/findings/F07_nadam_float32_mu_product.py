"""F07: torch.optim.NAdam keeps mu_product as a float32 tensor (_get_scalar_dtype) for float64 parameters,
so both NAdam step sizes are computed from a float32-rounded product (~1e5 float64 eps on params)."""
import torch

torch.manual_seed(0)
p0, grads = torch.randn(16, dtype=torch.float64), [torch.randn(16, dtype=torch.float64) for _ in range(10)]
finals = []
for default in (torch.float32, torch.float64):
    torch.set_default_dtype(default)  # _get_scalar_dtype follows the default dtype
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.NAdam([p], lr=0.01, foreach=False)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    print(f"default dtype {default}: mu_product stored as {opt.state[p]['mu_product'].dtype}")
    finals.append(p.detach().clone())
torch.set_default_dtype(torch.float32)
eps = torch.finfo(torch.float64).eps
print("param difference: "
      f"{((finals[0] - finals[1]).abs().max() / (eps * finals[1].abs().max())).item():.3g} float64 eps")
