"""F10: torch.optim.Rprop tests the sign of grad * prev by computing the product in the parameter's dtype:
when it underflows to 0 (float16: |grad * prev| < 3e-8; float32: < 7e-46) the documented "g_prev * g_t > 0"
branch is not taken: the step size is left unchanged instead of multiplied by etaplus (or by etaminus
for a sign flip, and the gradient is not zeroed)."""
import torch

for dtype, tiny in ((torch.float16, 1e-4), (torch.float32, 1e-23)):
    for foreach in (False, True):
        p = torch.nn.Parameter(torch.zeros(2, dtype=dtype))
        opt = torch.optim.Rprop([p], lr=0.01, foreach=foreach)
        for g in ([tiny, 1.0], [tiny, 1.0]):  # same positive sign twice: both elements should grow
            p.grad = torch.tensor(g, dtype=dtype)
            opt.step()
        print(f"{str(dtype):14s} foreach={foreach!s:5s}: grad*prev = {tiny * tiny:.0e} in real arithmetic, "
              f"{(torch.tensor(tiny, dtype=dtype) ** 2).item():.0e} in {dtype}; "
              f"step_size = {opt.state[p]['step_size'].tolist()} "
              f"(documented: both {0.01 * 1.2:.4g})")
