"""What a step must leave as the caller gave it: the gradients, and each parameter's dtype, shape, device and layout.

torch.optim never writes to ``p.grad`` and never changes what a parameter is: a library that negates the gradient
in place for ``maximize``, adds the L2 term into it, or turns a float32 parameter into float64 (``p.data =
p.data.double()``) can still produce the right numbers, which every float comparison passes, while users who clip,
log or accumulate gradients after ``step()``, or who hold the parameter's dtype, get something else. ``Given``
records both before a step and names, after it, what changed (bit for bit for the gradients, NaNs included).
A library that documents otherwise declares it as a deviation on the tensor ``grad`` or ``param kind``.
"""

from __future__ import annotations

import torch

GRAD, KIND = "grad", "param kind"  # the tensor names a breach is recorded under (declarable as deviations)


def _kind(p: torch.Tensor) -> tuple:
    return str(p.dtype).removeprefix("torch."), tuple(p.shape), str(p.device), str(p.layout).removeprefix("torch.")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values as raw bytes (a NaN equals itself; -0.0 differs from 0.0)."""
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    t = torch.empty(t.shape, dtype=t.dtype).copy_(t).reshape(-1)  # fresh strides: an expanded one-element grad too
    if t.is_complex():
        t = torch.view_as_real(t).reshape(-1)
    return t.view(torch.uint8) if t.dtype != torch.bool and t.numel() else t


class Given:
    """The gradients (the tensors and a copy of their bits) and the parameters' kinds, as the caller set them."""

    def __init__(self, params: dict[str, torch.Tensor]):
        self.grads = {n: (p.grad, _bits(p.grad)) for n, p in params.items() if p.grad is not None}  # _bits copies
        self.kinds = {n: _kind(p) for n, p in params.items()}

    def breaches(self, params: dict[str, torch.Tensor]) -> dict[tuple[str, str], str]:
        """(fqn, GRAD | KIND) -> what the step changed, for each parameter whose gradient or kind it changed."""
        out = {}
        for name, (tensor, bits) in self.grads.items():
            now = params[name].grad
            if now is None:
                out[(name, GRAD)] = "step() set the caller's gradient to None"
            elif now is not tensor:
                out[(name, GRAD)] = "step() replaced the caller's gradient tensor"
            elif not torch.equal(_bits(now), bits):
                out[(name, GRAD)] = "step() wrote into the caller's gradient (torch.optim never does)"
        for name, kind in self.kinds.items():
            now = _kind(params[name])
            if now != kind:
                what = [f"{field} {a} -> {b}" for field, a, b in zip(("dtype", "shape", "device", "layout"), kind, now)
                        if a != b]
                out[(name, KIND)] = f"step() changed the parameter's {', '.join(what)}"
        return out
