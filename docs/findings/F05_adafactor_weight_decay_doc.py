"""F05: torch.optim.Adafactor's docstring says weight_decay defaults to 1e-2; the code's default is 0.0."""
import inspect
import re

import torch

doc = re.search(r"weight_decay \(float, optional\): .*?\(default: ([^)]*)\)", torch.optim.Adafactor.__doc__, re.S)
print("documented default:", doc.group(1))
print("signature default: ", inspect.signature(torch.optim.Adafactor).parameters["weight_decay"].default)
