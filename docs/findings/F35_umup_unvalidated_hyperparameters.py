"""F35: unit_scaling.optim.Adam rewrites lr and weight_decay before torch validates them.

Its constructor turns lr and weight_decay into per-parameter group values (lr * scale, weight_decay / lr)
and calls torch.optim.Adam.__init__ without them, so torch validates only its own defaults (lr=1e-3,
weight_decay=0), never what the user passed: a negative lr, a negative weight_decay or a NaN lr are accepted
(torch.optim.Adam rejects each with a ValueError), and lr=0 (which torch accepts: warm-up from zero) raises
ZeroDivisionError, with independent_weight_decay on (the default) and even with weight_decay=0.
Exit 1 while any of these holds, 0 otherwise; 2 when unit-scaling is not installed.
"""
import sys

import torch

try:
    import unit_scaling as uu
    from unit_scaling.optim import Adam
except ImportError:
    print("cannot run: unit-scaling is not installed", file=sys.stderr)
    sys.exit(2)

present = False
for kwargs in ({"lr": -0.01}, {"lr": 0.01, "weight_decay": -1.0}, {"lr": float("nan")}, {"lr": 0.0}):
    w = uu.Parameter(torch.ones(4, 16), mup_type="weight")
    try:
        torch.optim.Adam([torch.nn.Parameter(torch.ones(4, 16))], **kwargs)
        theirs = "accepted"
    except ValueError as exc:
        theirs = f"ValueError: {exc}"
    try:
        group = Adam([w], **kwargs).param_groups[0]
        ours = f"accepted (group lr {group['lr']:.3g}, weight_decay {group['weight_decay']:.3g})"
    except Exception as exc:
        ours = f"{type(exc).__name__}: {exc}"
    present |= (theirs == "accepted") != ours.startswith("accepted")
    print(f"{kwargs}: torch.optim.Adam {theirs}; unit_scaling.optim.Adam {ours}")
if present:
    sys.exit("F35 present: unit_scaling.optim.Adam accepts or rejects lr/weight_decay unlike torch.optim.Adam")
print("F35 absent")
