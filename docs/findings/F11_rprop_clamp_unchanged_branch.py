"""F11: torch.optim.Rprop clamps step_size to step_sizes on every step, also where grad * prev == 0, whose
documented update is eta_t <- eta_{t-1} (no clamp). It differs when lr lies outside step_sizes: the very
first step (prev = 0) already moves the parameter by step_size_max (or min) instead of lr."""
import torch

for lr, sizes in ((1.0, (1e-6, 0.5)), (1e-8, (1e-6, 50.0))):
    p = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    opt = torch.optim.Rprop([p], lr=lr, step_sizes=sizes, foreach=False)
    p.grad = torch.ones(1, dtype=torch.float64)
    opt.step()
    print(f"lr={lr:g}, step_sizes={sizes}: first step moved the param by {-p.item():g} (documented: {lr:g}); "
          f"step_size = {opt.state[p]['step_size'].item():g}")
