"""F17: torch.optim.LBFGS raises on a non-contiguous parameter (reported as PyTorch #130346, closed).

_gather_flat_grad calls p.grad.view(-1); autograd gives the gradient the parameter's (column-major)
strides, so the first step raises "view size is not compatible with input tensor's size and stride".
Expected: LBFGS steps any parameter. Exit 1 while it raises, 0 once it steps.
"""
import sys

import torch

p = torch.nn.Parameter(torch.randn(4, 8).t())  # (8, 4), non-contiguous
opt = torch.optim.LBFGS([p])


def closure():
    opt.zero_grad()
    loss = (p**2).sum()
    loss.backward()
    return loss


print(f"torch {torch.__version__}; parameter contiguous: {p.is_contiguous()}")
try:
    opt.step(closure)
except RuntimeError as exc:
    print(f"RuntimeError: {str(exc).splitlines()[0]}")
    sys.exit("F17 present: LBFGS cannot step a non-contiguous parameter")
print("F17 absent")
