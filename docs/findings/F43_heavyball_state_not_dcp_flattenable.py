"""F43: heavyball 3.2.1's optimizer state cannot be written in torch.distributed.checkpoint's flat form.

heavyball nests each parameter's state under an integer view key ({0: {"update_by_adam_exp_avg_0": t, ...,
"is_initialized": {0}}}) holding a Python set. DCP's get_optimizer_state_dict(..., flatten_optimizer_state_dict=True)
(the form torch's FSDP2/TorchTitan checkpoints use) raises NotImplementedError on it; torch's own optimizers flatten.
Exit 1 while it raises, 0 once it flattens; 2 when heavyball is not installed.
"""
import sys

import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

try:
    import heavyball
except ImportError:
    print("cannot run: heavyball is not installed", file=sys.stderr)
    sys.exit(2)

model = torch.nn.Linear(3, 2)
opt = heavyball.AdamW(model.parameters(), lr=1e-3, consume_grad=False)
model(torch.randn(4, 3)).sum().backward()
opt.step()
flat = StateDictOptions(flatten_optimizer_state_dict=True)
torch_opt = torch.optim.AdamW(model.parameters())
torch_opt.step()
get_optimizer_state_dict(model, torch_opt, options=flat)  # torch's AdamW: flattens
try:
    get_optimizer_state_dict(model, opt, options=flat)
except NotImplementedError as exc:
    print(f"F43 present: DCP cannot flatten heavyball's state: {exc}", file=sys.stderr)
    sys.exit(1)
print("heavyball's state flattens: F43 fixed")
sys.exit(0)
