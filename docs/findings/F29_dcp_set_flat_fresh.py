"""F29: DCP's flat set_optimizer_state_dict drops saved state the target optimizer has not created.

torch.distributed.checkpoint.state_dict.set_optimizer_state_dict(...,
StateDictOptions(flatten_optimizer_state_dict=True))
rebuilds each parameter's state only from the keys the *target* optimizer already holds, created by a
zero-lr dummy step that is skipped when any parameter has a .grad. Documented/expected: the flat form loads
like the nested (default) form. (1) A fresh AdamW whose parameters hold gradients loads an empty state, with
no error; (2) max_exp_avg_sq saved with amsgrad=True is dropped when the target was built with amsgrad=False,
while amsgrad=True is loaded: the next step raises KeyError. torch 2.13, CPU, one process, no process group.
Exit 1 while either happens, 0 otherwise.
"""
import sys

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict, set_optimizer_state_dict

FLAT = StateDictOptions(flatten_optimizer_state_dict=True)


def model_and_grads(with_grads=True):
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    if with_grads:
        m(torch.randn(5, 3)).pow(2).sum().backward()
    return m


src = model_and_grads()
opt = torch.optim.AdamW(src.parameters(), lr=0.01, amsgrad=True)
opt.step()
flat = get_optimizer_state_dict(src, opt, options=FLAT)
bugs = 0
for form, options in ((flat, FLAT), (get_optimizer_state_dict(src, opt), None)):
    m = model_and_grads()  # gradients not zeroed before resuming
    target = torch.optim.AdamW(m.parameters(), lr=0.01, amsgrad=True)
    set_optimizer_state_dict(m, target, optim_state_dict=form, options=options)
    keys = sorted(target.state[m.weight]) if m.weight in target.state else []
    bugs += not keys
    print(f"{'flat' if options else 'nested'} form into a fresh AdamW whose parameters hold .grad: "
          f"weight's state {keys} "
          "(documented: exp_avg, exp_avg_sq, max_exp_avg_sq, step)")

m = model_and_grads(with_grads=False)
target = torch.optim.AdamW(m.parameters(), lr=0.01, amsgrad=False)
set_optimizer_state_dict(m, target, optim_state_dict=flat, options=FLAT)
print(f"flat form into AdamW(amsgrad=False): amsgrad loaded as {target.param_groups[0]['amsgrad']}, "
      f"weight's state {sorted(target.state[m.weight])}")
m(torch.randn(5, 3)).pow(2).sum().backward()
try:
    target.step()
except KeyError as exc:
    bugs += 1
    print(f"  next step: KeyError {exc}")
if bugs:
    sys.exit("F29 present: flat set_optimizer_state_dict dropped saved optimizer state")
print("F29 absent")
