"""Implementations under test behind one interface: torch's own variants (for-loop, foreach, fused, compiled,
capturable, graphed), a user's ``candidate=`` class, optbench's own kernels, and float32 master weights."""

from .adapter import Implementation, Stepper
from .candidate import CandidateError, candidate_implementation, load_optimizer_class
from .graphed import GraphedStep
from .master_weights import MasterWeights, master_variants, with_master_weights
from .torch_variants import TORCH_VARIANTS, optimizer_class, torch_implementations

__all__ = ["CandidateError", "GraphedStep", "Implementation", "MasterWeights", "Stepper", "TORCH_VARIANTS",
           "candidate_implementation", "load_optimizer_class", "master_variants", "optimizer_class",
           "torch_implementations", "with_master_weights"]
