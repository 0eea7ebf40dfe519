"""F78: bitsandbytes 0.50.2's CUDA AdamW kernels decay the updated parameter, not the one the step started from.

AdamW (Loshchilov and Hutter, 2019), as torch.optim.AdamW and bitsandbytes' own CPU kernels compute it:
p <- p * (1 - lr * weight_decay) - lr * m_hat / (sqrt(v_hat) + eps). The CUDA kernels (csrc/kernels.cu: the 32-bit
and the 8-bit blockwise Adam steps) add the update first and then multiply by (1 - lr * weight_decay), so the update
itself shrinks by lr * weight_decay as well; their bias corrections come from __powf, CUDA's fast power function.
One step of AdamW8bit from its initial state, on a contiguous parameter of 8192 elements, against that formula in
float64 (the first step's moments are exact: (1 - beta1) g and (1 - beta2) g^2). Exit 1 while the step is more
than 16 float32 eps of the update away, 0 otherwise; 2 without CUDA or bitsandbytes.
"""
import sys

import torch

if not torch.cuda.is_available():
    print("cannot run: needs a CUDA device", file=sys.stderr)
    sys.exit(2)
try:
    import bitsandbytes as bnb
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)

lr, decay, (beta1, beta2), eps = 1e-2, 0.1, (0.9, 0.999), 1e-8
gen = torch.Generator().manual_seed(0)
p0, g = torch.randn(8192, generator=gen) * 0.01, torch.randn(8192, generator=gen)
p = torch.nn.Parameter(p0.clone().cuda())
opt = bnb.optim.AdamW8bit([p], lr=lr, betas=(beta1, beta2), eps=eps, weight_decay=decay)
p.grad = g.cuda()
opt.step()
x, gd = p0.double(), g.double()
m, v = (1 - beta1) * gd, (1 - beta2) * gd * gd
update = lr * (m / (1 - beta1)) / ((v / (1 - beta2)).sqrt() + eps)
documented = x * (1 - lr * decay) - update
decayed_after = (x - update) * (1 - lr * decay)
got = p.detach().cpu().double()
unit = torch.finfo(torch.float32).eps * update.abs()
err, after = ((got - documented).abs() / unit).max().item(), ((got - decayed_after).abs() / unit).max().item()
print(f"one AdamW8bit step (lr {lr:g}, weight_decay {decay:g}): {err:.3g} float32 eps of the update from the "
      f"documented step; {after:.3g} from the step with the decay applied after the update")
present = err > 16
if present:
    print("F78 present: the CUDA AdamW step decays the updated parameter", file=sys.stderr)
sys.exit(1 if present else 0)
