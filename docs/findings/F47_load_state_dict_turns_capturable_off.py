"""F47: load_state_dict replaces the loading optimizer's capturable (and foreach, fused) with the checkpoint's.

Optimizer.load_state_dict keeps the saved param groups' options, implementation flags included: an optimizer built
with capturable=True that loads a checkpoint written by a non-capturable one is no longer capturable, and capturing
its step in a CUDA graph raises (as torch's whole-network capture recipe does after a restart). Likewise fused=True
silently becomes fused=False. Exit 1 while the loaded optimizer's flags are the checkpoint's, 0 otherwise; 2
without CUDA.
"""
import sys

import torch

if not torch.cuda.is_available():
    print("cannot run: needs a CUDA device", file=sys.stderr)
    sys.exit(2)

p = torch.nn.Parameter(torch.ones(4, device="cuda"))
saved = torch.optim.Adam([p], lr=0.01, foreach=True)
p.grad = torch.full_like(p, 0.5)
saved.step()

q = torch.nn.Parameter(torch.ones(4, device="cuda"))
graphed = torch.optim.Adam([q], lr=0.01, capturable=True, foreach=True)
fused = torch.optim.Adam([torch.nn.Parameter(torch.ones(4, device="cuda"))], lr=0.01, fused=True)
graphed.load_state_dict(saved.state_dict())
fused.load_state_dict(saved.state_dict())
flags = {"capturable after load": graphed.param_groups[0]["capturable"],
         "fused after load": fused.param_groups[0]["fused"]}
print(flags)
q.grad = torch.full_like(q, 0.5)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    graphed.step()  # warm-up outside the graph, as the recipe does
torch.cuda.current_stream().wait_stream(side)
try:
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.step()
    print("captured")
except RuntimeError as exc:
    print(f"capture raises: {str(exc).splitlines()[0]}")
found = not flags["capturable after load"] or not flags["fused after load"]
if found:
    print("F47 present: load_state_dict replaced the optimizer's capturable/fused flags with the checkpoint's",
          file=sys.stderr)
sys.exit(1 if found else 0)
