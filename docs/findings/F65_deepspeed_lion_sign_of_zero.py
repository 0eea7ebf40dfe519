"""F65: DeepSpeed 0.19.8's CPU Lion takes sign(0) as +1: a parameter with a zero gradient moves by -lr each step.

Lion's update is lr * sign(beta1 m + (1 - beta1) g) (Chen et al. 2023, Algorithm 2; torch.sign(0) = 0, as in the
paper's code and lion-pytorch). ``DeepSpeedCPULion``'s kernel (``csrc/lion/cpu_lion_impl.cpp`` ``Step_1``:
``tmp = -std::copysignf(alpha, tmp)``; ``Step_AVX`` in ``csrc/includes/cpu_lion.h``: the sign bit of tmp xor -lr)
copies the sign bit instead, and the sign bit of +0 is +: where the interpolation is exactly 0 (a zero gradient on
zero momentum: an embedding row not yet seen, a padding_idx row, a parameter whose gradient is exactly zero) the
parameter moves by -lr per step, every step until the momentum becomes non-zero, where the paper's Lion leaves it
alone. Shown with a zero gradient for 10 steps at lr 0.1, beside the paper's update in torch. Exit 1 while the
parameter moves, 0 otherwise; 2 when deepspeed is not installed.
"""
import sys

import torch

try:
    from deepspeed.ops.lion import DeepSpeedCPULion
except ImportError:
    print("cannot run: deepspeed is not installed", file=sys.stderr)
    sys.exit(2)

p = torch.nn.Parameter(torch.ones(40))
opt = DeepSpeedCPULion([p], lr=0.1)
m = torch.zeros(40)
ref = torch.ones(40)
for _ in range(10):
    g = torch.zeros(40)
    p.grad = g.clone()
    opt.step()
    ref -= 0.1 * torch.sign(0.9 * m + 0.1 * g)  # the paper's Lion (betas (0.9, 0.999), no weight decay)
    m = 0.999 * m + 0.001 * g
print(f"zero gradient, 10 steps at lr 0.1: the paper's Lion leaves the parameter at {ref[0].item():.4g}; "
      f"DeepSpeedCPULion moved it to {p[0].item():.4g} (every element: {bool((p.detach() == p.detach()[0]).all())})")
found = bool((p.detach() != ref).any())
if found:
    print("F65 present: DeepSpeedCPULion stepped -lr where sign(0) = 0 leaves the parameter alone", file=sys.stderr)
sys.exit(1 if found else 0)
