"""F02: a torch.compile'd optimizer step never updates the state of a 0-dim float64 parameter (CPU).

AdamW(foreach=False) stepped through torch.compile: for a 0-dim float64 parameter exp_avg stays 0
and the parameter only decays; the same parameter with shape (1,), or at float32, is updated.
"""
import torch

for dtype in (torch.float64, torch.float32):
    for shape in ((), (1,)):
        results = []
        for compiled in (False, True):
            torch._dynamo.reset()
            p = torch.nn.Parameter(torch.ones(shape, dtype=dtype))
            opt = torch.optim.AdamW([p], lr=0.1, foreach=False)
            step = torch.compile(opt.step) if compiled else opt.step
            for _ in range(3):
                p.grad = torch.full(shape, 0.5, dtype=dtype)
                step()
            results.append((opt.state[p]["exp_avg"].reshape(-1)[0].item(), p.reshape(-1)[0].item()))
        (m_eager, p_eager), (m_comp, p_comp) = results
        print(f"{str(dtype):14} shape {str(shape):5} exp_avg eager {m_eager:.6f} compiled {m_comp:.6f} | "
              f"param eager {p_eager:.9f} compiled {p_comp:.9f}")
