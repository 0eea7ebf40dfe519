"""F29: set_optimizer_state_dict with StateDictOptions(flatten_optimizer_state_dict=True) silently
drops saved optimizer state that the target optimizer does not already hold (torch 2.13, CPU, one
process, no process group).

Expected: loading a flat optimizer state_dict restores every saved state entry, as loading the same
checkpoint in DCP's nested (default) form does.
Observed: _unflatten_optim_state_dict rebuilds each parameter's state only from the keys the *target*
optimizer already has (``for state_name in optim.state[param]``). _init_optim_state creates those keys
with a zero-lr dummy step, but skips that step when any parameter already has a .grad. So
(1) a fresh AdamW whose parameters hold gradients (a forward/backward before resuming, gradients not
zeroed) loads an empty state for every parameter, with no error or warning; (2) a saved key the dummy
step does not create (max_exp_avg_sq, saved with amsgrad=True, target built with amsgrad=False) is
dropped while amsgrad=True is loaded, and the next step raises KeyError. A fresh optimizer without
gradients loads correctly. Exit 1 while either happens.
"""

import sys

import torch
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

FLAT = StateDictOptions(flatten_optimizer_state_dict=True)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))


def loss(m):
    return m(torch.randn(5, 3)).pow(2).sum()


src = model()
opt = torch.optim.AdamW(src.named_parameters(), lr=0.01, amsgrad=True)
loss(src).backward()
opt.step()
opt.zero_grad()
flat = get_optimizer_state_dict(src, opt, options=FLAT)
nested = get_optimizer_state_dict(src, opt)
saved_keys = sorted(next(iter(opt.state.values())))
print(f"saved state keys per parameter: {saved_keys}")


def load(form, with_grads, amsgrad=True):
    m = model()
    target = torch.optim.AdamW(m.named_parameters(), lr=0.01, amsgrad=amsgrad)
    if with_grads:
        loss(m).backward()
    set_optimizer_state_dict(m, target, optim_state_dict=form, options=FLAT if form is flat else None)
    return m, target


bugs = 0
for form_name, form in (("flat", flat), ("nested", nested)):
    for with_grads in (False, True):
        _, target = load(form, with_grads)
        keys = [sorted(s) for s in target.state.values()]
        lost = sum(k != saved_keys for k in keys) if keys else len(list(src.parameters()))
        print(f"{form_name:6} form, target params {'with' if with_grads else 'without'} .grad: "
              f"{lost} of {len(list(src.parameters()))} parameters lost saved state, e.g. {keys[0] if keys else {}}")
        bugs += form is flat and lost > 0

for form_name, form in (("flat", flat), ("nested", nested)):
    m, target = load(form, with_grads=False, amsgrad=False)
    print(f"{form_name:6} form into AdamW(amsgrad=False): loaded amsgrad={target.param_groups[0]['amsgrad']}, "
          f"state keys {sorted(next(iter(target.state.values())))}")
    try:
        loss(m).backward()
        target.step()
        print("  next step: ok")
    except KeyError as e:
        print(f"  next step: KeyError {e}")
        bugs += 1

print("BUG present: flat set_optimizer_state_dict dropped saved state" if bugs else "no bug")
sys.exit(1 if bugs else 0)
