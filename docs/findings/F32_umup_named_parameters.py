"""F32: unit_scaling.optim.Adam (unit-scaling 0.3.5) cannot take named parameters.

torch >= 2.5 optimizers take model.named_parameters() and record param_names (loading by name).
unit_scaling.optim.Adam rewrites the params argument before torch sees it (scaled_parameters: entry.copy(),
param.shape) and raises AttributeError on (name, tensor) pairs. Expected: accepted, as by torch.optim.Adam.
Exit 1 while it raises, 0 once accepted; 2 when unit-scaling is not installed.
"""
import sys

import torch

try:
    import unit_scaling as uu
    from unit_scaling.optim import Adam
except ImportError:
    print("cannot run: unit-scaling is not installed", file=sys.stderr)
    sys.exit(2)

model = torch.nn.Module()
model.proj = uu.Linear(8, 4, bias=True)
print("torch.optim.Adam(model.named_parameters()): param_names",
      torch.optim.Adam(model.named_parameters()).state_dict()["param_groups"][0]["param_names"])
try:
    Adam(model.named_parameters(), lr=1e-3)
except AttributeError as exc:
    print(f"unit_scaling.optim.Adam(model.named_parameters()): AttributeError: {exc}")
    sys.exit("F32 present: unit_scaling.optim.Adam cannot take named parameters")
print("F32 absent")
