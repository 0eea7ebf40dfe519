"""F01: torch.optim.SGD(fused=True) on CPU is wrong at bfloat16/float16 (PyTorch #191763).

One plain SGD step (no momentum) on a parameter larger than a SIMD vector: fused disagrees with the
for-loop by many ulps; with momentum the fused result is garbage. float32 agrees.
"""
import torch

torch.manual_seed(0)
for dtype in (torch.float32, torch.bfloat16, torch.float16):
    for momentum in (0.0, 0.9):
        p0 = torch.randn(1000, dtype=dtype) * 0.1
        g = torch.randn(1000, dtype=dtype) * 0.5
        out = {}
        for fused in (False, True):
            p = torch.nn.Parameter(p0.clone())
            opt = torch.optim.SGD([p], lr=0.01, momentum=momentum, foreach=False if not fused else None,
                                  fused=fused or None)
            for _ in range(2):
                p.grad = g.clone()
                opt.step()
            out[fused] = p.detach().double()
        ulp = torch.finfo(dtype).eps * out[False].abs().max()
        print(f"{str(dtype):15} momentum={momentum}: "
              f"max |fused - for-loop| = {(out[True] - out[False]).abs().max() / ulp:.3g} eps")
