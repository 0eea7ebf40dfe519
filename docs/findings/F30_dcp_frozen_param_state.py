"""F30: DCP's set_state_dict drops the optimizer state of a parameter that is frozen when it loads
(PyTorch #192202, open; fix proposed in PR #192307). torch 2.13, CPU, one process, no process group.

get_state_dict saves every parameter's optimizer state by FQN, frozen ones included; set_state_dict hands the
optimizer state only for parameters that require grad at load time. Documented/expected (and what torch's own
state_dict/load_state_dict do): the saved state is restored. A layer trained, frozen, saved, loaded and
unfrozen restarts its Adam moments from zero. Exit 1 while the frozen parameter's state is lost, 0 otherwise.
"""
import sys

import torch
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict


def make():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)
    return model, torch.optim.Adam(model.parameters(), lr=0.1)


model, opt = make()
model.weight.grad, model.bias.grad = torch.ones(2, 2), torch.ones(2)
opt.step()  # the bias is trained
model.bias.requires_grad_(False)  # then frozen
model_sd, optim_sd = get_state_dict(model, opt)
model2, opt2 = make()
model2.bias.requires_grad_(False)  # the same model, frozen as when it was saved
set_state_dict(model2, opt2, model_state_dict=model_sd, optim_state_dict=optim_sd)
print(f"saved optimizer state for {sorted(optim_sd['state'])}; bias state before saving "
      f"{sorted(opt.state[model.bias])}, "
      f"after set_state_dict {sorted(opt2.state[model2.bias]) or 'none'} (documented: the same)")
if not opt2.state[model2.bias]:
    sys.exit("F30 present: set_state_dict dropped a frozen parameter's optimizer state")
print("F30 absent")
