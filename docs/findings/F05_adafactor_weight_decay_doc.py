"""F05: torch.optim.Adafactor's docstring says weight_decay defaults to 1e-2; the signature's default is 0.0.

Exit 1 while the two disagree, 0 once they match.
"""
import inspect
import re
import sys

import torch

documented = re.search(r"weight_decay \(float, optional\): .*?\(default: ([^)]*)\)",
                       torch.optim.Adafactor.__doc__, re.S).group(1)
actual = inspect.signature(torch.optim.Adafactor).parameters["weight_decay"].default
print(f"documented default: {documented}; signature default: {actual}")
if float(documented) != actual:
    sys.exit("F05 present: Adafactor's documented weight_decay default is not the code's")
print("F05 absent")
