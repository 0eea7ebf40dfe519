"""F21: a torch.compile'd Adamax step graph-breaks on a non-contiguous parameter and ends up eager.

_single_tensor_adamax writes torch.maximum(..., out=exp_inf); exp_inf keeps the parameter's strides,
and Dynamo graph-breaks on an out= tensor that is not contiguous. The rest of the step then runs as
separate frames; _get_value(step_t) is compiled per parameter (guarded on the step tensor's id), so
after torch._dynamo.config.recompile_limit (8) parameters Dynamo gives up and runs them eagerly.
"""
import logging

import torch
from torch._dynamo.utils import counters


class Seen(logging.Handler):
    messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


logging.getLogger("torch._dynamo").addHandler(Seen())
params = [torch.nn.Parameter(torch.randn(16, 8).t()) for _ in range(12)]  # non-contiguous weights
opt = torch.optim.Adamax(params, foreach=False)
step = torch.compile(opt.step)
for _ in range(3):
    for p in params:
        p.grad = torch.randn_like(p)
    step()
print("graph breaks:", sorted({reason.splitlines()[0][:70] for reason in counters["graph_break"]}))
print("recompile limit hit:", any("recompile_limit" in m for m in Seen.messages))
