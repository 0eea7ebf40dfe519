"""F03: a torch.compile'd step computes Adam's bias corrections in float32 for float64 parameters.

torch.compile keeps the per-parameter ``step`` as a float32 tensor and does not ``.item()`` it
(optimizer._get_value), so ``1 - beta2 ** step`` is evaluated in float32: float64 parameters get
updates about 1e-7 relative off, i.e. ~1e8 float64 eps, where the eager for-loop uses Python floats.
"""
import torch

torch.manual_seed(0)
p0, grads = torch.randn(64, dtype=torch.float64), [torch.randn(64, dtype=torch.float64) for _ in range(5)]
finals = []
for compiled in (False, True):
    torch._dynamo.reset()
    p = torch.nn.Parameter(p0.clone())
    opt = torch.optim.Adam([p], lr=0.01, foreach=False)
    step = torch.compile(opt.step) if compiled else opt.step
    for g in grads:
        p.grad = g.clone()
        step()
    finals.append(p.detach())
eps = torch.finfo(torch.float64).eps
print("step dtype:", opt.state[p]["step"].dtype)
print("compiled vs eager after 5 steps: "
      f"{((finals[1] - finals[0]).abs().max() / (eps * finals[0].abs().max())).item():.3g} float64 eps")
