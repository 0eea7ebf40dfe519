"""F74: torchao 0.18's Adam and AdamW (AdamW8bit, AdamW4bit, AdamWFp8, _AdamW and the Adam forms) take a negative
weight_decay.

Their base class validates lr, eps and both betas as torch.optim.AdamW does ("Invalid learning rate", "Invalid
epsilon value", "Invalid beta parameter") but not weight_decay, which torch.optim.AdamW refuses below 0 ("Invalid
weight_decay value"). With a negative weight decay the decoupled decay p <- p (1 - lr wd) grows every parameter at
each step instead of shrinking it. This script builds each with weight_decay=-1 and steps once on a zero gradient.
Exit 1 while torchao accepts it, 0 once it raises; 2 without torchao.
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
try:
    from torchao.optim import AdamW8bit
except ImportError:
    print("cannot run: torchao is not installed", file=sys.stderr)
    sys.exit(2)

for cls in (torch.optim.AdamW, AdamW8bit):
    p = torch.nn.Parameter(torch.ones(64, 64))
    try:
        optimizer = cls([p], lr=0.1, weight_decay=-1.0)
    except ValueError as exc:
        print(f"{cls.__module__}.{cls.__name__}: refused: {exc}")
        continue
    p.grad = torch.zeros_like(p)
    optimizer.step()
    print(f"{cls.__module__}.{cls.__name__}: accepted weight_decay=-1; one step on a zero gradient took every element "
          f"from 1 to {p.detach()[0, 0].item():.4g}")
    if cls is AdamW8bit:
        print("F74 present: torchao takes a negative weight_decay without the validation torch.optim does")
        sys.exit(1)
print("F74 absent")
