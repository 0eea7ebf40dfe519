"""F02: torch.compile loses in-place updates to a 0-dim float64 CPU tensor (not an optimizer bug).

Dynamo traces a 0-dim float64 CPU tensor input as an unspecialized Python float (a `.item()` symbol);
with the default inductor backend (and aot_eager; backend="eager" is fine) the compiled function's
in-place write to it is dropped. Documented: a compiled function has the eager function's effects,
so `b.add_(1.0)` leaves b = 1.0. The same tensor at float32, or with shape (1,), is updated.

Consequence for optimizers: a compiled step loses in-place updates of a 0-dim float64 parameter's state.
SGD's momentum buffer, documented b_t = 0.9 b_{t-1} + g = 0.5, 0.95, 1.355, shrinks instead
(0.5, 0.45, 0.405: the scaling is kept, the added gradient lost); AdamW's exp_avg stays 0.
Exit 1 while the in-place update is lost, 0 once compiled == eager.
"""
import sys

import torch


def f(b):
    b.add_(1.0)


seen = {}
for dtype, shape in ((torch.float64, ()), (torch.float32, ()), (torch.float64, (1,))):
    torch._dynamo.reset()
    b = torch.zeros(shape, dtype=dtype)
    torch.compile(f)(b)
    seen[dtype, shape] = b.sum().item()
    print(f"compiled b.add_(1.0), {str(dtype)} shape {shape}: b = {seen[dtype, shape]} (documented: 1.0)")

torch._dynamo.reset()
p = torch.nn.Parameter(torch.ones((), dtype=torch.float64))
opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, foreach=False)
step = torch.compile(opt.step)
bufs = []
for _ in range(3):
    p.grad = torch.tensor(0.5, dtype=torch.float64)
    step()
    bufs.append(round(opt.state[p]["momentum_buffer"].item(), 6))
print(f"compiled SGD(momentum=0.9) on a 0-dim float64 parameter: momentum_buffer {bufs} (documented: [0.5, "
      f"0.95, 1.355])")
if seen[torch.float64, ()] != 1.0:
    sys.exit("F02 present: torch.compile drops in-place updates of a 0-dim float64 CPU tensor")
print("F02 absent: the compiled in-place update is kept")
