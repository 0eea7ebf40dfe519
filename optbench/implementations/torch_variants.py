"""An optimizer class's own variants: for-loop, foreach, fused, torch.compile'd, and on CUDA the
capturable step and that step captured in a CUDA graph (``graphed``)."""

from __future__ import annotations

import torch

from optbench.hyperparameters import takes

from .adapter import Implementation
from .candidate import load_optimizer_class

BASELINE = "for-loop"  # the implementation every other is compared with: torch's plain per-tensor loop
TORCH_VARIANTS = (BASELINE, "foreach", "fused", "compiled", "capturable", "graphed")
# Optimizers without a ``capturable`` flag whose step keeps no state on the host, so that it can be
# captured as it is (torch's whole-network capture example steps SGD in the graph).
CAPTURABLE_WITHOUT_FLAG = (torch.optim.SGD,)


def torch_implementations(optimizer_class: type) -> dict[str, Implementation]:
    """Every variant the class's signature offers (whether the device supports it is ``available``)."""
    has_foreach = takes(optimizer_class, "foreach", through_kwargs=False)
    impls = {"for-loop": Implementation("for-loop", optimizer_class, {"foreach": False} if has_foreach else {})}
    if has_foreach:
        impls["foreach"] = Implementation("foreach", optimizer_class, {"foreach": True})
    if takes(optimizer_class, "fused", through_kwargs=False):
        impls["fused"] = Implementation("fused", optimizer_class, {"fused": True})
    # The compiled step is the for-loop step through torch.compile (inductor), as torch's
    # compiled-optimizer recipe does.
    impls["compiled"] = Implementation("compiled", optimizer_class, dict(impls["for-loop"].flags), compiled=True)
    # CUDA only: the for-loop step with capturable=True, and that step captured in a CUDA graph and replayed.
    graph_flags = None
    if takes(optimizer_class, "capturable", through_kwargs=False):
        graph_flags = {**impls["for-loop"].flags, "capturable": True}
        impls["capturable"] = Implementation("capturable", optimizer_class, graph_flags, needs_cuda=True)
    elif issubclass(optimizer_class, CAPTURABLE_WITHOUT_FLAG):
        graph_flags = dict(impls["for-loop"].flags)
    if graph_flags is not None:
        impls["graphed"] = Implementation("graphed", optimizer_class, dict(graph_flags), graphed=True, needs_cuda=True)
    return impls


def optimizer_class(name: str) -> type:
    """torch.optim.<name> (e.g. ``Adafactor``), or any optimizer class by dotted path."""
    if "." in name:
        return load_optimizer_class(name, what="suite optimizer")
    cls = getattr(torch.optim, name, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise LookupError(f"torch.optim has no optimizer {name!r} in torch {torch.__version__}")
    return cls
