"""F73: torchao 0.18's Adam and AdamW (AdamW8bit, AdamW4bit, AdamWFp8, _AdamW and the Adam forms) compute Adam's bias
corrections in float32.

Each parameter's step counter is a float32 tensor (``torch.tensor(0.0)``), so ``1 - beta2**step`` is evaluated in
float32: at step 1 that is 1 - float32(0.999) = 0.00099998713, not 0.001, 1.3e-5 off by cancellation, and the
update (which divides by its square root) is off by about 6e-6 of itself, fifty float32 ulps; the error shrinks as
the step count grows. Adam's algorithm (Kingma and Ba 2015; torch.optim.AdamW, whose CPU steps take the count as a
Python number) has the exact bias corrections. This script takes one AdamW step of a float32 parameter with
torchao's _AdamW (its full-precision form: the same step function as the low-bit ones) and compares the update with
Adam's evaluated in float64 from the same float32 inputs, then with the same formula with float32 bias corrections;
torch.optim.AdamW beside it. Exit 1 while torchao's update is further than 1e-6 of itself from Adam's, 0 otherwise;
2 without torchao.
"""
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
try:
    from torchao.optim import _AdamW
except ImportError:
    print("cannot run: torchao is not installed", file=sys.stderr)
    sys.exit(2)

LR, BETAS, EPS, DECAY = 1e-3, (0.9, 0.999), 1e-8, 0.0


def one_step(cls):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.zeros(256, 64))  # from 0, the new parameter is the update, rounded once
    start = p.detach().clone()
    p.grad = torch.randn(256, 64)
    cls([p], lr=LR, betas=BETAS, eps=EPS, weight_decay=DECAY).step()
    return start.double().numpy(), p.grad.double().numpy(), p.detach().double().numpy()


def adam_update(g, bias1, bias2):
    """Adam's first update from zero moments with the given bias corrections, in float64."""
    m, v = (1 - BETAS[0]) * g, (1 - BETAS[1]) * g * g
    return -LR * (m / bias1) / (np.sqrt(v) / np.sqrt(bias2) + EPS)


start, g, after = one_step(_AdamW)
exact = adam_update(g, 1 - BETAS[0], 1 - BETAS[1])
f32 = np.float32
rounded = adam_update(g, float(f32(1) - f32(BETAS[0])), float(f32(1) - f32(BETAS[1])))
theirs = after - start
off = np.max(np.abs(theirs - exact) / np.abs(exact))
off_f32 = np.max(np.abs(theirs - rounded) / np.abs(rounded))
t_start, _, t_after = one_step(torch.optim.AdamW)
off_torch = np.max(np.abs((t_after - t_start) - exact) / np.abs(exact))
print(f"torchao _AdamW, step 1: the update is up to {off:.3g} of itself from Adam's ({off / 2**-23:.0f} float32 ulps)")
print(f"  from Adam's with float32 bias corrections (1 - float32(beta)): up to {off_f32:.3g}")
print(f"torch.optim.AdamW, step 1: up to {off_torch:.3g} of itself from Adam's")
if off > 1e-6:
    print("F73 present: torchao computes Adam's bias corrections in float32")
    sys.exit(1)
print("F73 absent")
