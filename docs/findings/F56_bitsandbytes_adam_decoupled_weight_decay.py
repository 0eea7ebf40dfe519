"""F56: bitsandbytes 0.50.2's Adam applies weight_decay decoupled, as its AdamW does, not as Adam's L2 term.

``bitsandbytes.optim.Adam`` is documented as Adam (its AdamW page: AdamW is "a variant of the Adam optimizer that
separates weight decay from the gradient update"), with torch.optim.Adam's signature, so ``weight_decay`` reads as
the L2 term wd * x added to the gradient before the moments. Its 32-bit step (every backend; CPU:
``backends/cpu/ops.py``, ``if weight_decay > 0.0: p_float.mul_(1.0 - lr * weight_decay)``) shrinks the parameter
instead: bitsandbytes' Adam and AdamW are one algorithm with different default weight_decay. Shown on CPU, float32,
5 steps, wd = 0.1: bitsandbytes' Adam against torch's Adam (L2) and AdamW (decoupled). Exit 1 while it matches
AdamW rather than Adam, 0 otherwise; 2 when bitsandbytes is not installed.
"""
import sys

import torch

try:
    import bitsandbytes as bnb
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)


def run(cls, **kw):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(64, 32))
    grads = [torch.randn(64, 32) * 1e-2 for _ in range(5)]
    opt = cls([p], lr=1e-2, weight_decay=0.1, **kw)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach()


ours = run(bnb.optim.Adam, optim_bits=32)
adam_l2 = run(torch.optim.Adam)
adamw = run(torch.optim.AdamW)
to_adam = (ours - adam_l2).abs().max().item()
to_adamw = (ours - adamw).abs().max().item()
print(f"bitsandbytes.optim.Adam(weight_decay=0.1) after 5 steps: max |diff| to torch Adam (L2) {to_adam:.3e}, "
      f"to torch AdamW (decoupled) {to_adamw:.3e}")
found = to_adamw < 1e-6 < to_adam
if found:
    print("F56 present: bitsandbytes' Adam applied decoupled (AdamW) weight decay, not Adam's L2 term",
          file=sys.stderr)
sys.exit(1 if found else 0)
