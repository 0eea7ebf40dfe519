"""F77: bitsandbytes 0.50.2 on CUDA keeps a transposed parameter's state in another element order than its own.

The first step allocates the state with torch.zeros_like(p), which keeps a transposed (column-major) parameter's
strides; update_step then replaces the parameter and gradient by contiguous copies (p.data = p.data.contiguous(),
bitsandbytes-foundation/bitsandbytes#1187), and the CUDA kernel reads and writes all of them through raw pointers in
memory order. Its own steps stay consistent (each memory position keeps its moments), but the state tensors, read
as the tensors they are (state_dict, a checkpoint written element by element, any .contiguous() copy), hold at
[i, j] the moments of another element: here the state after one step differs from the same run on the same values
held contiguously, and a resume through such a copy steps every element with another's moments. On CPU (torch ops,
which follow strides) both agree. Exit 1 while present, 0 otherwise; 2 without CUDA or bitsandbytes.
"""
import sys

import torch

if not torch.cuda.is_available():
    print("cannot run: needs a CUDA device", file=sys.stderr)
    sys.exit(2)
try:
    import bitsandbytes as bnb
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)



def element_by_element(obj):
    """The state with every tensor copied in its own element order (bitsandbytes nests them in a dict)."""
    if torch.is_tensor(obj):
        return obj.contiguous()
    return {k: element_by_element(v) for k, v in obj.items()} if isinstance(obj, dict) else obj


present = False
for cls in (bnb.optim.AdamW8bit, bnb.optim.AdamW):  # 8-bit state (8192 elements >= 4096) and 32-bit state
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(128, 64, generator=gen)
    grads = [torch.randn(64, 128, generator=gen) for _ in range(3)]
    runs = {}
    for layout in ("contiguous", "transposed"):  # the same (64, 128) values, held two ways
        p = torch.nn.Parameter(w.t().contiguous().cuda() if layout == "contiguous" else w.clone().cuda().t())
        opt = cls([p], lr=1e-2)
        p.grad = grads[0].cuda()
        opt.step()
        runs[layout] = (p, opt)
    key = "state1"
    first = (runs["contiguous"][1].state[runs["contiguous"][0]][key].float()
             - runs["transposed"][1].state[runs["transposed"][0]][key].float()).abs().max().item()
    # resume the transposed run from a copy of its state element by element (what a checkpoint of the tensors holds)
    p_t, opt_t = runs["transposed"]
    saved = opt_t.state_dict()
    saved["state"] = element_by_element(saved["state"])
    resumed = torch.nn.Parameter(p_t.detach().clone().contiguous())
    opt_r = cls([resumed], lr=1e-2)
    opt_r.load_state_dict(saved)
    p_c, opt_c = runs["contiguous"]
    for g in grads[1:]:
        p_c.grad, resumed.grad = g.cuda(), g.cuda()
        opt_c.step()
        opt_r.step()
    after = (p_c.detach() - resumed.detach()).abs().max().item()
    print(f"{cls.__name__:9}: {key} after one step, contiguous vs transposed parameter: max difference {first:.3g}; "
          f"two more steps after resuming the transposed run from its state tensors: the parameters differ by "
          f"{after:.3g} (a step is about 1e-2)")
    present |= first > 0.0 or after > 0.0
if present:
    print("F77 present: a transposed parameter's state is held in another element order on CUDA", file=sys.stderr)
sys.exit(1 if present else 0)
