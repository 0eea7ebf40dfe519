"""F08: torch.optim.Adagrad ignores a param group's own initial_accumulator_value.

The group stores it, but the accumulator is filled from the constructor argument (__init__) or
self.defaults (add_param_group), so a group asking for 0.5 starts from the constructor's 0.
"""
import torch

a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
opt = torch.optim.Adagrad([{"params": [a]}, {"params": [b], "initial_accumulator_value": 0.5}], lr=0.1)
print("group 1 initial_accumulator_value:", opt.param_groups[1]["initial_accumulator_value"])
print("state sum of its parameter:       ", opt.state[b]["sum"].tolist(), "(expected [0.5, 0.5])")
