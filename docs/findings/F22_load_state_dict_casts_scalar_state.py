"""F22: load_state_dict casts NAdam's mu_product and ASGD's eta and mu to the parameter's dtype.

torch keeps these step-dependent scalars as float32 tensors (like ``step``), but
Optimizer._process_value_according_to_param_policy exempts only the key "step" from the cast to the
parameter's dtype. With bfloat16 parameters a resumed run is no longer the uninterrupted run.
"""

import torch

torch.manual_seed(0)


def run(load_at=None, steps=20):
    p = torch.nn.Parameter(torch.randn(4096, dtype=torch.bfloat16))
    opt = torch.optim.NAdam([p], lr=1e-2)
    grads = [torch.randn(4096, dtype=torch.bfloat16) for _ in range(steps)]
    for i, g in enumerate(grads):
        if i == load_at:
            saved = opt.state_dict()
            opt = torch.optim.NAdam([p], lr=1e-2)
            opt.load_state_dict(saved)
            print("mu_product saved", saved["state"][0]["mu_product"].dtype, "loaded", opt.state[p]["mu_product"].dtype)
        p.grad = g
        opt.step()
    return p.detach().clone()


torch.manual_seed(1)
straight = run()
torch.manual_seed(1)
resumed = run(load_at=3)
print("resumed == uninterrupted:", torch.equal(straight, resumed),
      "elements that differ:", int((straight != resumed).sum()), "of", straight.numel())
