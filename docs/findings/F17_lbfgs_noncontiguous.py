"""F17: torch.optim.LBFGS crashes on a non-contiguous parameter: _gather_flat_grad uses p.grad.view(-1)
(lbfgs.py, _gather_flat_grad) and autograd gives the grad the parameter's (column-major) strides."""
import torch

p = torch.nn.Parameter(torch.randn(4, 8).t())  # (8, 4), non-contiguous
opt = torch.optim.LBFGS([p])


def closure():
    opt.zero_grad()
    loss = (p**2).sum()
    loss.backward()
    return loss


print(torch.__version__, "param contiguous:", p.is_contiguous())
try:
    opt.step(closure)
    print("no error")
except RuntimeError as e:
    print("RuntimeError:", e)
