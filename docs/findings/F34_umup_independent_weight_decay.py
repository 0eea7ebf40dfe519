"""F34: unit_scaling.optim.Adam's "lr-independent" weight decay depends on lr (unit-scaling 0.3.5).

Documented (scaled_parameters, which Adam uses): "independent_weight_decay: enable lr-independent weight decay,
which performs an update per-step that does not depend on lr" (on by default). The code divides weight_decay
by the parameter's lr and hands it to torch.optim.Adam, whose weight decay is L2: added to the gradient
before Adam normalises by sqrt(v). The decay is normalised with it, so the step is about lr * sign(p + ...):
the decay per step follows lr. Without a gradient it is lr whatever weight_decay is; with a gradient of
comparable size (weight_decay / lr near |g| / |p|) weight_decay matters again, through the ratio.
The documented per-step decay (p *= 1 - weight_decay) is what Adam's decoupled form gives (last line).
Exit 1 while the decay per step depends on lr, 0 otherwise; 2 when unit-scaling is not installed.
"""
import sys

import torch

try:
    import unit_scaling as uu
    from unit_scaling.optim import Adam
except ImportError:
    print("cannot run: unit-scaling is not installed", file=sys.stderr)
    sys.exit(2)


def decay_per_step(lr, weight_decay, grad_rms, **kwargs):
    """Mean decrease per step over 10 steps of a u-muP norm parameter (lr scale 1) started at 1.0."""
    torch.manual_seed(0)
    p = uu.Parameter(torch.ones(4096, dtype=torch.float64), mup_type="norm")
    opt = Adam([p], lr=lr, weight_decay=weight_decay, **kwargs)  # independent_weight_decay=True: the default
    for _ in range(10):
        p.grad = torch.randn_like(p) * grad_rms
        opt.step()
    return float(1.0 - p.detach().mean()) / 10


ratios = []
print("mean decay per step of a parameter at 1.0 (documented: the same at lr 1e-3 and 1e-2)")
for weight_decay in (0.1, 0.01):
    for grad_rms in (0.0, 1.0):
        small, large = decay_per_step(1e-3, weight_decay, grad_rms), decay_per_step(1e-2, weight_decay, grad_rms)
        ratios.append(large / small)
        print(f"  weight_decay {weight_decay:g}, gradient RMS {grad_rms:g}: {small:.3g} at lr 1e-3, "
              f"{large:.3g} at lr 1e-2")
small, large = (decay_per_step(lr, 0.1, 0.0, decoupled_weight_decay=True) for lr in (1e-3, 1e-2))
print(f"  decoupled_weight_decay=True, weight_decay 0.1, no gradient: {small:.3g} at lr 1e-3, {large:.3g} at lr 1e-2")
if any(abs(r - 1) > 0.1 for r in ratios):
    sys.exit("F34 present: the 'lr-independent' weight decay per step depends on lr")
print("F34 absent")
