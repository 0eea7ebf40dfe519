"""F37: icefall's ScaledAdam raises IndexError when it clips hard (factor < 0.5) and the model holds a zero-size
parameter: its diagnostics (_show_param_with_unusual_grad -> largest_index) take argmax() of the empty tensor.

Run from an icefall checkout (k2-fsa/icefall, zipformer recipe; lhotse installed, or any module lhotse.utils with
fix_random_seed):  PYTHONPATH=egs/librispeech/ASR/zipformer python F37_icefall_scaledadam_zero_size_clipping.py
Exits 1 while the bug is present, 0 once fixed, 2 when icefall's optim.py cannot be imported.
"""

import sys

import torch

try:
    from optim import ScaledAdam  # icefall's egs/librispeech/ASR/zipformer/optim.py
except ImportError:
    print("cannot run: icefall's zipformer optim.py is not importable (see the docstring)", file=sys.stderr)
    sys.exit(2)

torch.manual_seed(0)
weight = torch.nn.Parameter(torch.randn(8, 8))
empty = torch.nn.Parameter(torch.zeros(0))  # e.g. a pruned or disabled head
opt = ScaledAdam([("weight", weight), ("empty", empty)], clipping_scale=1.0, clipping_update_period=2)
try:
    for step in range(12):
        scale = 100.0 if step == 11 else 1.0  # one gradient 100x the recent median: clipped by < 0.5
        weight.grad = torch.randn(8, 8) * scale
        empty.grad = torch.zeros(0)
        opt.step()
except IndexError as exc:
    print(f"step {step} raised IndexError: {exc}")
    sys.exit("F37 present: ScaledAdam's clipping diagnostics raise on a zero-size parameter")
print("F37 absent: clipping with a zero-size parameter works")
