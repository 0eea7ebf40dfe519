"""F36: unit_scaling.optim.Adam.add_param_group neither scales the new parameters' lr nor uses the user's lr.

The u-muP scaling (and the metadata check) happen once, in the constructor; add_param_group is torch's,
and fills a new group from optimizer.defaults, which hold torch.optim.Adam's own defaults (lr=1e-3,
weight_decay=0: the constructor never passes the user's to torch). A layer added later (fine-tuning, a
layer unfrozen, progressive growing) trains at lr 1e-3 unscaled, without the user's weight decay, and a
parameter without u-muP metadata is accepted whatever allow_non_unit_scaling_params says.
Exit 1 while an added weight's lr is not the one the constructor would give it, 0 otherwise;
2 when unit-scaling is not installed.
"""
import sys

import torch

try:
    import unit_scaling as uu
    from unit_scaling.optim import Adam
except ImportError:
    print("cannot run: unit-scaling is not installed", file=sys.stderr)
    sys.exit(2)

first = uu.Parameter(torch.ones(4, 16), mup_type="weight")
late = uu.Parameter(torch.ones(4, 64), mup_type="weight")
opt = Adam([first], lr=0.1, weight_decay=0.1)
opt.add_param_group({"params": [late]})
expected = Adam([late], lr=0.1, weight_decay=0.1).param_groups[0]
added = opt.param_groups[-1]
print(f"defaults: lr {opt.defaults['lr']}, weight_decay {opt.defaults['weight_decay']}")
print(f"a weight (4, 64) given to the constructor: lr {expected['lr']:.4g}, "
      f"weight_decay {expected['weight_decay']:.4g}")
print(f"the same weight through add_param_group:    lr {added['lr']:.4g}, weight_decay {added['weight_decay']:.4g}")
opt.add_param_group({"params": [torch.nn.Parameter(torch.ones(3))]})
print("a parameter without mup_type through add_param_group: accepted, lr", opt.param_groups[-1]["lr"])
if abs(added["lr"] - expected["lr"]) > 1e-12:
    sys.exit("F36 present: add_param_group skips the u-muP scaling and the user's lr")
print("F36 absent")
