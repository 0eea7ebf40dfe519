"""F34: unit_scaling.optim.Adam's independent_weight_decay does not make the decay per step lr-independent.

Documented (unit_scaling.optim.scaled_parameters, which Adam uses): "independent_weight_decay: enable
lr-independent weight decay, which performs an update per-step that does not depend on lr". The code divides
weight_decay by each parameter's scaled lr and hands it to torch.optim.Adam, whose weight decay is L2: added
to the gradient *before* Adam's normalisation by sqrt(v), so the decay is normalised too. weight_decay / lr
is large (100 for 0.1 / 1e-3), the decay term outweighs any gradient of a parameter of size ~1, and the step
becomes lr * sign(p): the decay per step is lr, and weight_decay no longer matters. The documented decay,
p * weight_decay per step at any lr, is what the same coefficient gives through torch.optim.Adam's decoupled
form (decoupled_weight_decay=True, AdamW's): shown last. Exit 1 while the decay per step depends on lr.
"""
import torch
import unit_scaling as uu
from unit_scaling.optim import Adam

STEPS = 10


def decay_per_step(lr: float, weight_decay: float, grad_rms: float, **kwargs) -> float:
    """Mean decrease per step of a u-muP norm parameter (lr scale 1) started at 1.0, gradients N(0, grad_rms^2)."""
    torch.manual_seed(0)
    p = uu.Parameter(torch.ones(4096, dtype=torch.float64), mup_type="norm")
    opt = Adam([p], lr=lr, weight_decay=weight_decay, **kwargs)  # independent_weight_decay=True: the default
    for _ in range(STEPS):
        p.grad = torch.randn_like(p) * grad_rms
        opt.step()
    return float(1.0 - p.detach().mean()) / STEPS


present = False
print(f"mean decay per step over {STEPS} steps of a parameter at 1.0 (documented: about weight_decay, at any lr)")
for weight_decay in (0.1, 0.01):
    for grad_rms in (0.0, 1.0):
        seen = {lr: decay_per_step(lr, weight_decay, grad_rms) for lr in (1e-3, 1e-2)}
        ratio = seen[1e-2] / seen[1e-3]
        present |= abs(ratio - 1.0) > 0.1
        print(f"  Adam, weight_decay {weight_decay:g}, gradient RMS {grad_rms:g}: {seen[1e-3]:.3g} at lr 1e-3, "
              f"{seen[1e-2]:.3g} at lr 1e-2 (x{ratio:.3g})")
seen = {lr: decay_per_step(lr, 0.1, 0.0, decoupled_weight_decay=True) for lr in (1e-3, 1e-2)}
print(f"  Adam(decoupled_weight_decay=True), weight_decay 0.1, no gradient: {seen[1e-3]:.3g} at lr 1e-3, "
      f"{seen[1e-2]:.3g} at lr 1e-2 (1 - 0.9**{STEPS} over {STEPS} steps: p *= 1 - weight_decay each step)")
print("PRESENT: the decay per step depends on lr" if present else "fixed: the decay per step is lr-independent")
raise SystemExit(1 if present else 0)
