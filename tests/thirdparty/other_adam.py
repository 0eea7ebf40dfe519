"""Adam as another library might write it: right algorithm, other conventions. A candidate spec
(``tests/thirdparty/other_adam.yaml``) adapts it to ``suite=adam`` with no code; without one, optbench says what
differs.

- weight decay (L2, as torch.optim.Adam's) is spelled ``wd``; its default lr is 1e-2, not torch's 1e-3;
- a constructor argument of its own (``fuse_updates``);
- its moments are nested, ``state["moments"] = {"m": ..., "v": ...}``, its step count is ``state["t"]``, and it keeps a
  gradient norm for itself (``state["grad_norm"]``);
- it rejects bad arguments with AssertionError, in its own words.
"""

import math

import torch


class OtherAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, betas=(0.9, 0.999), eps=1e-8, wd=0.0, fuse_updates=False):
        assert lr >= 0.0, f"lr should be >= 0, not {lr}"
        assert 0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0, f"betas should be in [0, 1), not {betas}"
        assert eps >= 0.0, f"eps should be >= 0, not {eps}"
        assert wd >= 0.0, f"wd should be >= 0, not {wd}"
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, wd=wd, fuse_updates=fuse_updates))

    def bias_corrections(self, t: int, beta1: float, beta2: float) -> tuple[float, float]:
        return 1 - beta1**t, 1 - beta2**t

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad if not group["wd"] else p.grad.add(p, alpha=group["wd"])
                state = self.state[p]
                if not state:
                    state["t"] = 0  # a Python int (torch's load casts every state tensor but 'step' to the dtype)
                    state["moments"] = {"m": torch.zeros_like(p), "v": torch.zeros_like(p)}
                    state["grad_norm"] = torch.zeros((), dtype=p.dtype)
                state["t"] += 1
                m, v = state["moments"]["m"], state["moments"]["v"]
                m.lerp_(grad, 1 - beta1)
                v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bc1, bc2 = self.bias_corrections(state["t"], beta1, beta2)
                denom = (v.sqrt() / math.sqrt(bc2)).add_(group["eps"])
                p.addcdiv_(m, denom, value=-group["lr"] / bc1)
                state["grad_norm"] = grad.norm()


class OffByOneOtherAdam(OtherAdam):
    """The same, with the bias corrections one step behind: the spec adapts it, and parity still fails it."""

    def bias_corrections(self, t: int, beta1: float, beta2: float) -> tuple[float, float]:
        return 1 - beta1 ** (t + 1), 1 - beta2 ** (t + 1)
