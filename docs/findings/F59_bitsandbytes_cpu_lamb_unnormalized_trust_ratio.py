"""F59: bitsandbytes 0.50.2's CPU LAMB caps its trust ratio with the norm of the update before bias correction.

bitsandbytes' 32-bit LAMB is Adam whose step is scaled down where the update's norm exceeds ``max_unorm`` (default 1)
times the parameter's (``optimizer_update_32bit``: "max_unorm: The maximum update norm relative to the weight norm"):
x <- x - lr * min(1, max_unorm ||x|| / ||u||) * u with u = m_hat / (sqrt(v_hat) + eps). The CUDA kernel
(``kPreconditionOptimizer32bit2State``) and the default backend (``_optimizer_precondition_32bit``) take ||u|| of that
bias-corrected update. The CPU kernel (``backends/cpu/ops.py``, ``_optimizer_update_32bit_cpu``) takes the norm of
``state1 / (state2.sqrt() + eps * correction2)``, which is u * (1 - b1^t) / sqrt(1 - b2^t): ||u|| 3.2 times too large at
step 1 (6.6 at step 12, at the default betas), so wherever the cap applies each step is sqrt(1 - b2^t) / (1 - b1^t)
of LAMB's. One 256 x 64 weight, CPU float32, 12 steps, against the formula in float64 with the bias-corrected norm
(LAMB, and bitsandbytes' other kernels) and with the CPU kernel's. Exit 1 while the CPU step follows the
uncorrected norm, 0 otherwise; 2 when bitsandbytes is not installed.
"""
import math
import sys

import numpy as np
import torch

try:
    import bitsandbytes as bnb
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)

lr, (b1, b2), eps, steps = 1e-3, (0.9, 0.999), 1e-8, 12
torch.manual_seed(0)
x0 = torch.randn(256, 64) * 64**-0.5  # ||x|| about 16, below ||u|| about 128: the cap applies
grads = [torch.randn(256, 64) * 1e-2 for _ in range(steps)]

p = torch.nn.Parameter(x0.clone())
opt = bnb.optim.LAMB([p], lr=lr, betas=(b1, b2), eps=eps, optim_bits=32)
for g in grads:
    p.grad = g.clone()
    opt.step()
bnb_x = p.detach().double().numpy()


def model(corrected_norm: bool) -> np.ndarray:
    x, m, v = x0.double().numpy(), 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        g = g.double().numpy()
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        c1, c2 = 1 - b1**t, math.sqrt(1 - b2**t)
        u = (m / c1) / (np.sqrt(v) / c2 + eps)
        unorm = np.linalg.norm(u) if corrected_norm else np.linalg.norm(m / (np.sqrt(v) + eps * c2))
        xnorm = np.linalg.norm(x)
        x = x - lr * (xnorm / unorm if unorm > xnorm else 1.0) * u
    return x


x_lamb, x_cpu_formula = model(True), model(False)
step_bnb = np.linalg.norm(bnb_x - x0.double().numpy())
step_lamb = np.linalg.norm(x_lamb - x0.double().numpy())
off_lamb = np.abs(bnb_x - x_lamb).max() / np.abs(x_lamb).max()
off_cpu = np.abs(bnb_x - x_cpu_formula).max() / np.abs(x_cpu_formula).max()
print(f"after {steps} steps: ||x_t - x_0|| bitsandbytes CPU {step_bnb:.4e}, LAMB with bias-corrected ||u|| "
      f"{step_lamb:.4e} (ratio {step_bnb / step_lamb:.3f}); max relative difference to that {off_lamb:.2e}, to the "
      f"formula with the uncorrected norm {off_cpu:.2e}")
found = off_cpu < 1e-5 < off_lamb
if found:
    print("F59 present: the CPU LAMB kernel's trust-ratio cap uses the norm of the update without bias correction",
          file=sys.stderr)
sys.exit(1 if found else 0)
