"""F72: bitsandbytes 0.50.2's LAMB8bit steps as its AdamW8bit does: no trust ratio on its 8-bit parameters.

LAMB (You et al. 2020) scales each tensor's Adam direction by ||x|| / ||u||; bitsandbytes' 32-bit LAMB caps that
ratio at 1 (max_unorm=1.0: "The maximum update norm for trust-ratio clipping"). LAMB8bit's docstring calls it an
"8-bit LAMB optimizer" and says, in its max_unorm note only, that the 8-bit block-wise update does not implement the
clipping. A parameter of at least min_8bit_size elements gets no ratio at all: the step is AdamW8bit's, bit for
bit. This script steps a 128 x 64 weight 5 times with LAMB8bit and with AdamW8bit (the same options), and with the
32-bit LAMB beside them, on CPU. Exit 1 while LAMB8bit equals AdamW8bit, 0 otherwise; 2 without bitsandbytes.
"""
import sys

import torch

try:
    import bitsandbytes as bnb
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)


def run(cls, **kw):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(128, 64) * 0.02)  # 8,192 elements: 8-bit state (min_8bit_size 4096)
    start = p.detach().clone()
    opt = cls([p], lr=1e-2, weight_decay=0.01, **kw)
    for i in range(5):
        torch.manual_seed(10 + i)
        p.grad = torch.randn(128, 64) * 0.01
        opt.step()
    return (p.detach() - start).norm().item(), p.detach()


lamb8_moved, lamb8 = run(bnb.optim.LAMB8bit)
adamw8_moved, adamw8 = run(bnb.optim.AdamW8bit)
lamb32_moved, _ = run(bnb.optim.LAMB, optim_bits=32)
same = torch.equal(lamb8, adamw8)
print(f"LAMB8bit  moved the weight by {lamb8_moved:.4g} (norm of the change over 5 steps)")
print(f"AdamW8bit moved the weight by {adamw8_moved:.4g}; LAMB8bit == AdamW8bit bit for bit: {same}")
print(f"LAMB (32-bit state, its trust ratio capped at 1) moved it by {lamb32_moved:.4g}")
if same:
    print("F72 present: LAMB8bit applies no trust ratio; its step is AdamW8bit's")
    sys.exit(1)
print("F72 absent: LAMB8bit's step differs from AdamW8bit's")
