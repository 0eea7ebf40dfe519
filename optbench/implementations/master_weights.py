"""The float32 master-copy pattern: a bfloat16/float16 model, an optimizer stepping float32 copies.

As mixed-precision training does it: the optimizer is built on float32 copies of the model's named
parameters (names kept, so state is still by FQN); each step upcasts the model's gradients into the
copies' ``.grad``, steps the copies, and copies them back into the model's parameters (rounded to
the model's dtype). The Stepper names the copies (``Stepper.params``) and their precision, so parity
judges the masters and their state at float32's eps and the model's parameters at the run dtype
(``optbench.numerics.master_copy``). ``impl=[for-loop,for-loop+master32]`` selects it for any torch variant.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from .adapter import Implementation, ParamGroups, Stepper

SUFFIX = "+master32"
MASTER_DTYPE = torch.float32
MODEL_DTYPES = (torch.bfloat16, torch.float16)
# The checks it takes part in: those that judge the stepped trajectory. A round-trip would need the
# masters in the state_dict, and memory or speed would count the model's parameters, not the optimizer's.
CHECKS = ("parity", "cross", "forms", "deviations")


def master_copy(p: torch.Tensor) -> torch.nn.Parameter:
    """A float32 leaf holding ``p``'s values (exactly: bfloat16 and float16 embed in float32)."""
    value = torch.empty_like(p, dtype=MASTER_DTYPE).copy_(p.detach())
    return torch.nn.Parameter(value, requires_grad=p.requires_grad)


class MasterStep:
    """One step of the pattern: model gradients upcast into the masters, step, masters copied back."""

    def __init__(self, step, model: dict[str, torch.Tensor], masters: dict[str, torch.Tensor]):
        self.step, self.model, self.masters = step, model, masters

    def __call__(self, closure=None):
        if closure is not None:
            raise RuntimeError("the master-copy pattern here steps gradient-driven optimizers only")
        for name, p in self.model.items():
            self.masters[name].grad = None if p.grad is None else p.grad.to(MASTER_DTYPE)
        out = self.step()
        with torch.no_grad():
            for name, p in self.model.items():
                p.copy_(self.masters[name])
        return out


@dataclass(frozen=True)
class MasterWeights(Implementation):
    """A torch variant stepping float32 master copies of a lower-precision model's parameters."""

    def build(self, groups: ParamGroups, options: dict | None = None) -> Stepper:
        model = {name: p for group in groups for name, p in group["params"]}
        masters = {name: master_copy(p) for name, p in model.items()}
        inner = super().build([{**g, "params": [(n, masters[n]) for n, _ in g["params"]]} for g in groups], options)
        return Stepper(inner.optimizer, MasterStep(inner.step, model, masters), params=masters, precision=MASTER_DTYPE)

    def available(self, device: torch.device, dtype: torch.dtype) -> str | None:
        if dtype not in MODEL_DTYPES:
            return f"a float32 master copy is for a bfloat16 or float16 model, not {str(dtype).removeprefix('torch.')}"
        if issubclass(self.optimizer_class, torch.optim.LBFGS):
            return "the master-copy pattern here steps gradient-driven optimizers only (LBFGS evaluates a closure)"
        if issubclass(self.optimizer_class, getattr(torch.optim, "Muon", ())):
            return ("Muon computes its update in bfloat16 by design (F13): its masters cannot be held to "
                    "float32's tolerance")
        return super().available(device, MASTER_DTYPE)


def with_master_weights(impl: Implementation) -> MasterWeights:
    """``impl`` stepping float32 masters, named ``<impl>+master32``."""
    values = {f.name: getattr(impl, f.name) for f in fields(impl)}
    return MasterWeights(**{**values, "name": impl.name + SUFFIX, "checks": CHECKS})


def master_variants(names: list[str], variants: dict[str, Implementation]) -> dict[str, Implementation]:
    """The ``<variant>+master32`` names among ``names`` whose variant exists, built."""
    return {n: with_master_weights(variants[n.removesuffix(SUFFIX)]) for n in names
            if n.endswith(SUFFIX) and n.removesuffix(SUFFIX) in variants}
