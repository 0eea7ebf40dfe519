"""F24: autograd through two steps of a differentiable optimizer raises for Rprop, Adamax, Adam/AdamW with
amsgrad, centered RMSprop, and with a Tensor lr that requires grad, NAdam and SGD with momentum, once the
gradients require grad (as a backward with create_graph=True makes them, the meta-learning use).

Each first step saves a state tensor for backward (Rprop's step_size in addcmul_, Adamax's exp_avg,
amsgrad's max_exp_avg_sq under sqrt, the centered grad_avg, NAdam's exp_avg times a Tensor lr, SGD's buffer
in addcmul_ with a Tensor lr) that the second step then changes in place, so backward raises "one of the
variables needed for gradient computation has been modified by an inplace operation". One step works (torch's
own differentiable tests take one step from a given state). SGD's foreach step takes differentiable=True
(the other optimizers assert "_foreach ops don't support autograd") and raises already after one step with
weight decay.
"""

import torch

CASES = [("Rprop", {}), ("Adamax", {}), ("Adam", {"amsgrad": True}), ("AdamW", {"amsgrad": True}),
         ("RMSprop", {"centered": True}), ("NAdam", {"lr": "tensor"}), ("SGD", {"momentum": 0.9, "lr": "tensor"}),
         ("SGD", {"weight_decay": 0.1, "foreach": True}), ("Adam", {}), ("SGD", {"momentum": 0.9})]

for name, options in CASES:
    outcome = []
    for steps in (1, 2):
        torch.manual_seed(0)
        p0 = torch.randn(5, dtype=torch.float64, requires_grad=True)
        g1 = torch.randn(5, dtype=torch.float64, requires_grad=True)  # the first step's gradient
        kwargs = {"foreach": False, **options}
        inputs = [p0, g1]
        if options.get("lr") == "tensor":
            kwargs["lr"] = torch.tensor(0.01, dtype=torch.float64, requires_grad=True)
            inputs.append(kwargs["lr"])
        p = p0.clone()  # not a leaf: the differentiable step runs on autograd's graph
        opt = getattr(torch.optim, name)([p], differentiable=True, **kwargs)
        for step in range(steps):
            p.grad = g1 if step == 0 else torch.randn(5, dtype=torch.float64)
            opt.step()
        try:
            torch.autograd.grad(p.sum(), inputs, allow_unused=True)
            outcome.append(f"{steps} step(s): ok")
        except RuntimeError as exc:
            outcome.append(f"{steps} step(s): RuntimeError: {str(exc)[:60]}...")
    print(f"{name} {options}: " + "; ".join(outcome))
