"""F21: a torch.compile'd Adamax step graph-breaks on a non-contiguous parameter and ends up eager.

_single_tensor_adamax writes torch.maximum(..., out=exp_inf); exp_inf keeps the parameter's strides and
Dynamo graph-breaks on a non-contiguous out= tensor. The rest of the step runs as separate frames;
_get_value(step_t) is compiled per parameter (guarded on the step tensor's id) until recompile_limit (8),
after which Dynamo runs the remaining parameters eagerly. Values are right; the step is not compiled.
Expected: one graph, as for contiguous parameters. Exit 1 while the out= graph break happens, 0 otherwise.
"""
import logging
import sys

import torch
from torch._dynamo.utils import counters

logging.getLogger("torch._dynamo").setLevel(logging.ERROR)  # silence the recompile-limit warning
params = [torch.nn.Parameter(torch.randn(16, 8).t()) for _ in range(12)]  # non-contiguous weights
opt = torch.optim.Adamax(params, foreach=False)
step = torch.compile(opt.step)
for _ in range(2):
    for p in params:
        p.grad = torch.randn_like(p)
    step()
breaks = sorted({reason.splitlines()[0][:70] for reason in counters["graph_break"]})
print(f"graph breaks: {breaks}; frames compiled: {counters['stats']['unique_graphs']}")
if any("out=" in b for b in breaks):
    sys.exit("F21 present: compiled Adamax graph-breaks on a non-contiguous parameter")
print("F21 absent")
