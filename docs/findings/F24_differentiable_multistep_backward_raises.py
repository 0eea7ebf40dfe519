"""F24: autograd through two differentiable=True steps raises for seven optimizers.

Once the gradients require grad (as backward(create_graph=True) makes them), the first step saves a state
tensor for backward that the second step changes in place: "one of the variables needed for gradient
computation has been modified by an inplace operation". One step works. Documented/expected: derivatives
through any number of differentiable steps. Exit 1 while any case raises after two steps, 0 otherwise.
"""
import sys

import torch

CASES = [("Rprop", {}), ("Adamax", {}), ("Adam", {"amsgrad": True}), ("AdamW", {"amsgrad": True}),
         ("RMSprop", {"centered": True}), ("NAdam", {"lr": "tensor"}), ("SGD", {"momentum": 0.9, "lr": "tensor"}),
         ("SGD", {"weight_decay": 0.1, "foreach": True}),  # foreach SGD takes differentiable=True; raises after 1 step
         ("Adam", {})]  # the last: a control that works
failed = []
for name, options in CASES:
    torch.manual_seed(0)
    p0 = torch.randn(5, dtype=torch.float64, requires_grad=True)
    g1 = torch.randn(5, dtype=torch.float64, requires_grad=True)
    kwargs = {"foreach": False, **options}
    if options.get("lr") == "tensor":
        kwargs["lr"] = torch.tensor(0.01, dtype=torch.float64, requires_grad=True)
    p = p0.clone()
    opt = getattr(torch.optim, name)([p], differentiable=True, **kwargs)
    for g in (g1, torch.randn(5, dtype=torch.float64)):
        p.grad = g
        opt.step()
    try:
        torch.autograd.grad(p.sum(), [p0, g1], allow_unused=True)
        print(f"{name} {options}: backward through 2 steps ok")
    except RuntimeError as exc:
        failed.append(name)
        print(f"{name} {options}: RuntimeError: {str(exc)[:70]}...")
if failed:
    sys.exit(f"F24 present: backward through two differentiable steps raises for {len(failed)} cases")
print("F24 absent")
