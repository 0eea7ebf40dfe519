"""F08: torch.optim.Adagrad ignores a param group's own initial_accumulator_value.

The group stores it, but the accumulator is filled from the constructor argument (__init__) or
self.defaults (add_param_group). Documented: per-group options override the defaults, so a group asking
for 0.5 starts its `sum` at 0.5. Exit 1 while it starts at the constructor's value, 0 otherwise.
"""
import sys

import torch

a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
opt = torch.optim.Adagrad([{"params": [a]}, {"params": [b], "initial_accumulator_value": 0.5}], lr=0.1)
print(f"group 1 initial_accumulator_value {opt.param_groups[1]['initial_accumulator_value']}; "
      f"its parameter's sum {opt.state[b]['sum'].tolist()} (documented: [0.5, 0.5])")
if opt.state[b]["sum"].tolist() != [0.5, 0.5]:
    sys.exit("F08 present: Adagrad ignores the group's initial_accumulator_value")
print("F08 absent")
