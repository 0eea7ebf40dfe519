"""F22: load_state_dict casts NAdam's mu_product and ASGD's eta and mu to the parameter's dtype.

torch keeps these step-dependent scalars as float32 tensors, like `step`, but
Optimizer._process_value_according_to_param_policy exempts only the key "step" from the cast to the
parameter's dtype (the class of PyTorch #75224). Documented/expected: a state_dict round trip restores the
state as saved. With bfloat16 parameters the scalars are rounded to bfloat16 on load.
Exit 1 while a loaded scalar differs from the saved one, 0 otherwise.
"""
import sys

import torch

changed = False
for cls, keys in ((torch.optim.NAdam, ("mu_product",)), (torch.optim.ASGD, ("eta", "mu"))):
    p = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    opt = cls([p], lr=1e-2)
    for _ in range(3):
        p.grad = torch.ones(4, dtype=torch.bfloat16)
        opt.step()
    saved = opt.state_dict()
    loaded = cls([p], lr=1e-2)
    loaded.load_state_dict(saved)
    for k in keys:
        a, b = saved["state"][0][k], loaded.state[p][k]
        changed |= a.dtype != b.dtype or a.item() != b.item()
        print(f"{cls.__name__} {k}: saved {a.item()!r} ({a.dtype}), loaded {b.item()!r} ({b.dtype}) "
              f"(documented: equal)")
if changed:
    sys.exit("F22 present: load_state_dict casts step-dependent scalar state to the parameter dtype")
print("F22 absent")
