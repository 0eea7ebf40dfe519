"""F30: torch.distributed.checkpoint's set_state_dict drops the optimizer state of frozen parameters
(PyTorch #192202, open; fix proposed in PR #192307). torch 2.13, CPU, one process, no process group.

get_state_dict saves every parameter's optimizer state under its FQN, frozen ones included, but
set_state_dict hands the optimizer state only for parameters that require grad at load time, and
Optimizer.load_state_dict then holds nothing for the others. torch's own state_dict/load_state_dict
keeps it. Two consequences:
(1) Adagrad creates its state at construction, so a frozen parameter has state (step 0, sum =
    initial_accumulator_value) in the uninterrupted run and none after a DCP load (what
    ``optbench run suite=adagrad checks=[reshard]`` reports as a state only one side has).
(2) A parameter trained, then frozen, saved and loaded, then unfrozen restarts its Adam moments and
    step from zero: the continued run silently departs from the uninterrupted one.
Exit 1 while either happens.
"""
import copy
import sys

import torch
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def make(cls, **kw):
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    return model, cls(model.parameters(), lr=0.1, **kw)


def step(model, opt, g):
    model.weight.grad = torch.full((2, 2), g)
    model.bias.grad = torch.full((2,), g) if model.bias.requires_grad else None
    opt.step()


bugs = 0
# (1) Adagrad: a frozen parameter's state, created at construction
model, opt = make(torch.optim.Adagrad)
model.bias.requires_grad_(False)
step(model, opt, 1.0)
model_sd, optim_sd = get_state_dict(model, opt)
model2, opt2 = make(torch.optim.Adagrad)
model2.bias.requires_grad_(False)
set_state_dict(model2, opt2, model_state_dict=model_sd, optim_state_dict=optim_sd)
print(f"Adagrad, frozen bias: saved by FQN {sorted(optim_sd['state'])}; state before the load "
      f"{sorted(opt.state[model.bias])}, after it {sorted(opt2.state[model2.bias]) or 'none'}")
bugs += not opt2.state[model2.bias]

# (2) Adam: a parameter trained, frozen, saved, loaded, unfrozen
model, opt = make(torch.optim.Adam)
step(model, opt, 10.0)  # bias trained: exp_avg, exp_avg_sq, step
model.bias.requires_grad_(False)  # then frozen (a layer-freezing schedule)
step(model, opt, 10.0)
model_sd, optim_sd = get_state_dict(model, opt)
plain = copy.deepcopy(opt.state_dict())
model2, opt2 = make(torch.optim.Adam)
model2.bias.requires_grad_(False)  # the same model, frozen as when it was saved
set_state_dict(model2, opt2, model_state_dict=model_sd, optim_state_dict=optim_sd)
model3, opt3 = make(torch.optim.Adam)
model3.bias.requires_grad_(False)
opt3.load_state_dict(plain)
print(f"Adam, bias trained then frozen: after set_state_dict {sorted(opt2.state[model2.bias]) or 'none'}; "
      f"after torch's load_state_dict {sorted(opt3.state[model3.bias])}")
for m, o in ((model, opt), (model2, opt2)):  # unfreeze and continue: uninterrupted vs DCP-loaded
    m.bias.requires_grad_(True)
    step(m, o, -1.0)
diff = (model.bias - model2.bias).abs().max().item()
print(f"after unfreezing, bias uninterrupted {model.bias.tolist()} vs DCP-loaded {model2.bias.tolist()}: "
      f"max diff {diff:.3g}")
bugs += diff != 0

print("BUG present: set_state_dict dropped frozen parameters' optimizer state" if bugs else "no bug")
sys.exit(1 if bugs else 0)
