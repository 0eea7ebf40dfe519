"""F28: with a Tensor lr, LBFGS stores the group's lr Tensor itself as state["t"], so a scheduler's
in-place lr update rewrites the step length the optimizer saved, and the next step's curvature pair
s = d * t is built from the new lr instead of the step actually taken (torch 2.13, CPU).

Expected: a Tensor lr and a float lr with the same values and schedule give the same parameters.
Observed: state["t"] is the same object as param_groups[0]["lr"]; after scheduler.step() it holds the
new lr, and from the second step on the parameters differ from the float-lr run.
"""

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

    for step in range(3):
        opt.step(closure)
        t_used = float(opt.state[x]["t"])
        sched.step()
        print(f"  step {step + 1}: state t {t_used:.4g} after the step, "
              f"{float(opt.state[x]['t']):.4g} after scheduler.step()")
    return x.detach().clone(), opt.state[x]["t"] is opt.param_groups[0]["lr"]


print("float lr:")
x_float, _ = run(0.5)
print("Tensor lr:")
x_tensor, aliased = run(torch.tensor(0.5, dtype=torch.float64))
print(f"state t aliases the group's lr Tensor: {aliased}")
print(f"max |x_tensor - x_float| after 3 steps: {float((x_tensor - x_float).abs().max()):.3g}")
