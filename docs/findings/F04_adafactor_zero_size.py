"""F04: torch.optim.Adafactor raises ZeroDivisionError on a zero-size parameter (for-loop and foreach)."""
import torch

for foreach in (False, True):
    p = torch.nn.Parameter(torch.zeros(0))
    opt = torch.optim.Adafactor([p], foreach=foreach)
    p.grad = torch.zeros(0)
    try:
        opt.step()
        print(f"foreach={foreach}: ok")
    except ZeroDivisionError as exc:
        print(f"foreach={foreach}: ZeroDivisionError: {exc}")
