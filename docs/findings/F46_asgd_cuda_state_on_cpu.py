"""F46: ASGD's state saved on CUDA cannot be stepped on CPU by foreach ASGD: its step stays on CUDA.

torch's load_state_dict moves every state tensor to its parameter's device, except ``step`` (kept where it was
unless capturable or fused: the other optimizers keep their step on the CPU). ASGD keeps step, eta and mu on the
parameter's device, so a checkpoint written on a GPU and loaded for a CPU run keeps a CUDA step beside CPU
tensors, and the foreach step raises. Exit 1 while the CPU step after the load raises, 0 otherwise; 2 without CUDA.
"""
import io
import sys

import torch

if not torch.cuda.is_available():
    print("cannot run: needs a CUDA device", file=sys.stderr)
    sys.exit(2)

p = torch.nn.Parameter(torch.ones(4, device="cuda"))
opt = torch.optim.ASGD([p], lr=0.01, foreach=True)
p.grad = torch.full_like(p, 0.5)
opt.step()
buffer = io.BytesIO()
torch.save(opt.state_dict(), buffer)
buffer.seek(0)

q = torch.nn.Parameter(torch.ones(4))
cpu_opt = torch.optim.ASGD([q], lr=0.01, foreach=True)
cpu_opt.load_state_dict(torch.load(buffer, weights_only=True))
print("after the load on CPU:", {k: str(v.device) for k, v in cpu_opt.state[q].items()})
q.grad = torch.full_like(q, 0.5)
try:
    cpu_opt.step()
except RuntimeError as exc:
    print(f"F46 present: the CPU step raises RuntimeError: {str(exc).splitlines()[0]}", file=sys.stderr)
    sys.exit(1)
print("the CPU step ran")
sys.exit(0)
