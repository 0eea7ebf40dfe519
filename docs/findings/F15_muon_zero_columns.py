"""F15: torch.optim.Muon: a (4, 0) parameter raises ZeroDivisionError in _adjust_lr (A / B with B = 0);
a (0, 4) parameter works (norm 0 clamped to eps, empty update)."""
import torch

for shape in [(0, 4), (4, 0)]:
    p = torch.zeros(shape, requires_grad=True)
    p.grad = torch.zeros(shape)
    try:
        torch.optim.Muon([p]).step()
        print(shape, "ok")
    except Exception as e:
        print(shape, type(e).__name__, e)
