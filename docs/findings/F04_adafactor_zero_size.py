"""F04: torch.optim.Adafactor raises ZeroDivisionError on a zero-size parameter (for-loop and foreach).

Documented/expected: a step on an empty parameter is a no-op, as for Adam and every other torch optimizer
(the #100701 class of edge case). Measured: RMS(param) divides by param.numel() == 0.
Exit 1 while it raises, 0 once the step is a no-op.
"""
import sys

import torch

raised = []
for foreach in (False, True):
    p = torch.nn.Parameter(torch.zeros(0))
    p.grad = torch.zeros(0)
    try:
        torch.optim.Adafactor([p], foreach=foreach).step()
        print(f"foreach={foreach}: ok (documented: ok)")
    except ZeroDivisionError as exc:
        raised.append(foreach)
        print(f"foreach={foreach}: ZeroDivisionError: {exc} (documented: ok)")
if raised:
    sys.exit("F04 present: Adafactor raises ZeroDivisionError on a zero-size parameter")
print("F04 absent")
