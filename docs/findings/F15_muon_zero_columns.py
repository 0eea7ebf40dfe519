"""F15: torch.optim.Muon raises ZeroDivisionError on an (n, 0) parameter (_adjust_lr: A / B with B = 0).

Expected: an empty parameter's step is a no-op, as for a (0, n) parameter and every other torch optimizer.
Exit 1 while the (4, 0) parameter raises, 0 once it steps.
"""
import sys

import torch

raised = False
for shape in ((0, 4), (4, 0)):
    p = torch.zeros(shape, requires_grad=True)
    p.grad = torch.zeros(shape)
    try:
        torch.optim.Muon([p]).step()
        print(f"{shape}: ok (documented: ok)")
    except ZeroDivisionError as exc:
        raised = True
        print(f"{shape}: ZeroDivisionError: {exc} (documented: ok)")
if raised:
    sys.exit("F15 present: Muon raises ZeroDivisionError on an (n, 0) parameter")
print("F15 absent")
