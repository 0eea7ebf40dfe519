"""F76: bitsandbytes 0.50.2 on CUDA ends the Python process when a parameter has no elements.

A zero-size parameter with a (zero-size) gradient is legal in torch.optim: every torch optimizer steps it as a no-op.
Every bitsandbytes optimizer (Adam, AdamW, Adam8bit, AdamW8bit, PagedAdamW8bit, Lion, Lion8bit, SGD, SGD8bit,
RMSprop, RMSprop8bit, Adagrad, Adagrad8bit, LAMB, LARS, AdEMAMix, AdEMAMix8bit) instead launches its CUDA kernel with
0 blocks, and its error check prints "Error invalid argument at line N in file /src/csrc/ops.cu" and calls exit(1):
no exception, no traceback, no chance for the caller to save anything. On CPU the same optimizers step it.
Each step here runs in a child process (the one that dies). Exit 1 while present, 0 otherwise; 2 without CUDA or
bitsandbytes.
"""
import subprocess
import sys

import torch

if not torch.cuda.is_available():
    print("cannot run: needs a CUDA device", file=sys.stderr)
    sys.exit(2)
try:
    import bitsandbytes  # noqa: F401
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)

STEP = """
import sys, torch, bitsandbytes.optim as O
big = torch.nn.Parameter(torch.ones(8192, device=sys.argv[2]))  # 8-bit state where the class has it
empty = torch.nn.Parameter(torch.zeros(0, device=sys.argv[2]))
for p in (big, empty):
    p.grad = torch.ones_like(p)
getattr(O, sys.argv[1])([big, empty], lr=1e-3).step()
print("stepped")
"""
present = False
for cls in ("Adam", "AdamW8bit", "Lion8bit"):
    for device in ("cuda", "cpu"):
        done = subprocess.run([sys.executable, "-c", STEP, cls, device], capture_output=True, text=True, timeout=300)
        said = (done.stdout.strip() or done.stderr.strip().splitlines()[-1:] or ["(nothing)"])
        said = said if isinstance(said, str) else said[0]
        print(f"{cls:9} on {device:4}: exit {done.returncode}: {said}")
        present |= device == "cuda" and done.returncode != 0 and "ops.cu" in done.stderr
if present:
    print("F76 present: a zero-size parameter ends the process in bitsandbytes' CUDA step", file=sys.stderr)
sys.exit(1 if present else 0)
