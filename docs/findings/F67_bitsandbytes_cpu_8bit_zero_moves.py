"""F67: bitsandbytes 0.50.2's CPU 8-bit blockwise quantization stores 0 as a non-zero code.

Block-wise dynamic quantization (Dettmers et al., 2022) stores each value as the nearest entry of its map, and 0 is
an entry of both maps (signed and unsigned). bitsandbytes' CPU kernel (since its CPU optimizer support, 0.50)
instead rounds x / absmax to the nearest of 65,536 evenly spaced points on [-1, 1], a grid without 0, then looks up
that point's code: an exact 0 in a block with a non-zero value is stored as about 2.1e-5 x absmax (signed map, the
first moment) or 1.6e-5 x absmax (unsigned, the second). So ``Adam8bit`` on CPU moves coordinates whose gradient is
always 0 (frozen or padding rows, masked weights) whenever their block holds other values; torch's Adam, and the
32-bit bitsandbytes Adam, leave them where they are. Exit 1 while present, 0 otherwise; 2 when bitsandbytes is not
installed.
"""
import sys

import torch

try:
    import bitsandbytes as bnb
    import bitsandbytes.functional as F
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)

codes, state = F.quantize_blockwise(torch.tensor([0.0, 1.0]), code=F.create_dynamic_map(signed=True), blocksize=256)
back = F.dequantize_blockwise(codes, state)
print(f"quantize_blockwise([0, 1]) on CPU: codes {codes.tolist()}, dequantized {back.tolist()} (0 is code 127)")

torch.manual_seed(0)
p8 = torch.nn.Parameter(torch.randn(64, 128))
p32 = torch.nn.Parameter(p8.detach().clone())
start = p8.detach().clone()
opt8, opt32 = bnb.optim.Adam8bit([p8], lr=1e-3), torch.optim.Adam([p32], lr=1e-3)
mask = torch.ones(64, 128)
mask[:, :8] = 0  # the first 8 coordinates of every row never get a gradient
for _ in range(20):
    g = torch.randn(64, 128) * mask
    p8.grad, p32.grad = g.clone(), g.clone()
    opt8.step()
    opt32.step()
moved8 = (p8.detach() - start)[:, :8].abs().max().item()
moved32 = (p32.detach() - start)[:, :8].abs().max().item()
print(f"after 20 steps at lr=1e-3, coordinates that never had a gradient moved by at most {moved8:.3g} (Adam8bit) "
      f"and {moved32:.3g} (torch.optim.Adam)")
present = back[0].item() != 0.0 or moved8 > 0.0
if present:
    print("F67 present: 0 is stored as a non-zero 8-bit code on CPU", file=sys.stderr)
sys.exit(1 if present else 0)
