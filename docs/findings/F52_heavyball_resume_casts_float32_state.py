"""F52: heavyball 3.2.1 keeps its optimizer state in float32 for bfloat16 (and float64) parameters, but a resumed run
gets it back in the parameters' dtype.

heavyball stores state at its ``storage_dtype`` (float32 by default) whatever the parameters' dtype, and takes
torch's ``Optimizer.load_state_dict``, which casts every state tensor but ``step`` to the parameter's dtype
(pytorch/pytorch#43706, open): after save and load, a bfloat16 model's second moments are bfloat16, rounded, and the
resumed run is not the uninterrupted one. Exit 1 while the state comes back in another dtype, 0 otherwise; 2 when
heavyball is not installed.
"""
import io
import sys

import torch

try:
    import heavyball
except ImportError:
    print("cannot run: heavyball is not installed", file=sys.stderr)
    sys.exit(2)


def dtypes(opt):
    found = {}

    def walk(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif torch.is_tensor(value) and value.is_floating_point() and value.dim() > 0:
            found[prefix] = value.dtype
    for state in opt.state.values():
        walk("", state)
    return found


torch.manual_seed(0)
p = torch.nn.Parameter(torch.randn(8, 4, dtype=torch.bfloat16))
opt = heavyball.AdamW([p], lr=1e-3)
for _ in range(3):
    p.grad = torch.randn_like(p)
    opt.step()
before = dtypes(opt)
buffer = io.BytesIO()
torch.save(opt.state_dict(), buffer)
buffer.seek(0)
resumed = heavyball.AdamW([p], lr=1e-3)
resumed.load_state_dict(torch.load(buffer, weights_only=False))
p.grad = torch.randn_like(p)
resumed.step()
after = dtypes(resumed)
changed = {k: (str(before[k]), str(after.get(k))) for k in before if after.get(k) != before[k]}
print(f"state dtypes before saving: {sorted({str(v) for v in before.values()})}; after loading and one step: "
      f"{sorted({str(v) for v in after.values()})}")
if changed:
    print(f"F52 present: {len(changed)} state tensors held in another dtype after the load, e.g. "
          f"{next(iter(changed.items()))}", file=sys.stderr)
sys.exit(1 if changed else 0)
