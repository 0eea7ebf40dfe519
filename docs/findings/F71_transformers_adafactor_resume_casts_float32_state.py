"""F71: transformers 5.24.0's Adafactor keeps its state in float32 for bfloat16 parameters, but a resumed run gets it
back in the parameters' dtype.

Adafactor steps bfloat16 (and float16) parameters in float32: it casts the gradient up and creates ``exp_avg``,
``exp_avg_sq_row``, ``exp_avg_sq_col`` (or ``exp_avg_sq``) and ``RMS`` at float32. It takes torch's
``Optimizer.load_state_dict``, which casts every state tensor but ``step`` to the parameter's dtype
(pytorch/pytorch#43706, open): after a save and a load the moments are bfloat16, rounded, and the resumed run is not
the uninterrupted one. Exit 1 while the state comes back in another dtype, 0 otherwise; 2 without transformers.
"""
import io
import sys

import torch

try:
    from transformers.optimization import Adafactor
except ImportError:
    print("cannot run: transformers is not installed", file=sys.stderr)
    sys.exit(2)


def dtypes(opt):
    return {k: str(v.dtype) for state in opt.state.values() for k, v in state.items()
            if torch.is_tensor(v) and v.is_floating_point()}


def build(p):
    return Adafactor([p], lr=1e-3, scale_parameter=False, relative_step=False, warmup_init=False, beta1=0.9)


torch.manual_seed(0)
grads = [torch.randn(8, 4, dtype=torch.bfloat16) for _ in range(5)]
start = torch.randn(8, 4, dtype=torch.bfloat16)
p = torch.nn.Parameter(start.clone())
opt = build(p)
for g in grads[:3]:
    p.grad = g.clone()
    opt.step()
held = dtypes(opt)
buffer = io.BytesIO()
torch.save(opt.state_dict(), buffer)
saved_p = p.detach().clone()
for g in grads[3:]:  # the uninterrupted run
    p.grad = g.clone()
    opt.step()
q = torch.nn.Parameter(saved_p)
resumed = build(q)
buffer.seek(0)
resumed.load_state_dict(torch.load(buffer, weights_only=True))
loaded = dtypes(resumed)
for g in grads[3:]:  # the resumed run, the same gradients
    q.grad = g.clone()
    resumed.step()
a, b = next(iter(opt.state.values())), next(iter(resumed.state.values()))
moved = {k: float((a[k] - b[k]).abs().max()) for k in a if torch.is_tensor(a[k]) and a[k].is_floating_point()
         and not torch.equal(a[k], b[k])}
print(f"state held as {sorted(set(held.values()))}; right after load_state_dict: {sorted(set(loaded.values()))}; "
      f"after 2 more steps, state that differs from the uninterrupted run's (max abs): {moved}")
present = loaded != held or bool(moved)
if present:
    print(f"F71 present: the float32 state came back as {sorted(set(loaded.values()))}, rounded; the resumed run's "
          f"state is not the uninterrupted one's", file=sys.stderr)
sys.exit(1 if present else 0)
