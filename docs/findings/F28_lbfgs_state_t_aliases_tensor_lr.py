"""F28: with a Tensor lr, LBFGS stores the group's lr Tensor itself as state["t"].

An lr scheduler updates a Tensor lr in place, so after scheduler.step() the saved step length is the next
lr, and the next step's curvature pair s = d * t is built from a step length never taken. Documented /
expected: a Tensor lr and a float lr with the same schedule give the same parameters.
Exit 1 while they differ, 0 otherwise.
"""
import sys

import torch

A = torch.diag(torch.linspace(0.5, 4.0, 8, dtype=torch.float64))


def run(lr):
    torch.manual_seed(0)
    x = torch.nn.Parameter(torch.randn(8, dtype=torch.float64))
    opt = torch.optim.LBFGS([x], lr=lr, max_iter=2, history_size=4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def closure():
        opt.zero_grad()
        loss = 0.5 * x @ A @ x
        loss.backward()
        return loss

    for _ in range(3):
        opt.step(closure)
        sched.step()
    return x.detach(), opt.state[x]["t"] is opt.param_groups[0]["lr"]


x_float, _ = run(0.5)
x_tensor, aliased = run(torch.tensor(0.5, dtype=torch.float64))
diff = (x_tensor - x_float).abs().max().item()
print(f"state['t'] is the group's lr Tensor: {aliased}; max |x(Tensor lr) - x(float lr)| after 3 steps: "
      f"{diff:.3g} (documented: 0)")
if diff > 1e-12:
    sys.exit("F28 present: LBFGS's state t aliases a Tensor lr")
print("F28 absent")
