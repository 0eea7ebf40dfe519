"""An optimizer class's own variants: for-loop, foreach, fused and torch.compile'd."""

from __future__ import annotations

import inspect

import torch

from .candidate import load_optimizer_class
from .implementation import Implementation

TORCH_VARIANTS = ("for-loop", "foreach", "fused", "compiled")


def _accepts(optimizer_class: type, flag: str) -> bool:
    return flag in inspect.signature(optimizer_class.__init__).parameters


def torch_implementations(optimizer_class: type) -> dict[str, Implementation]:
    """Every variant the class's signature offers (whether the device supports it is ``available``)."""
    has_foreach = _accepts(optimizer_class, "foreach")
    impls = {"for-loop": Implementation("for-loop", optimizer_class, {"foreach": False} if has_foreach else {})}
    if has_foreach:
        impls["foreach"] = Implementation("foreach", optimizer_class, {"foreach": True})
    if _accepts(optimizer_class, "fused"):
        impls["fused"] = Implementation("fused", optimizer_class, {"fused": True})
    # The compiled step is the for-loop step through torch.compile (inductor), as torch's
    # compiled-optimizer recipe does.
    impls["compiled"] = Implementation("compiled", optimizer_class, dict(impls["for-loop"].flags), compiled=True)
    return impls


def optimizer_class(name: str) -> type:
    """torch.optim.<name> (e.g. ``Adafactor``), or any optimizer class by dotted path."""
    if "." in name:
        return load_optimizer_class(name, what="suite optimizer")
    cls = getattr(torch.optim, name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise LookupError(f"torch.optim has no optimizer {name!r} in torch {torch.__version__}")
    return cls
