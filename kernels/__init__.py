"""Implementations under test: torch's own variants and user candidates, behind one interface."""

from .implementation import Implementation, Stepper
from .candidate import CandidateError, candidate_implementation, load_optimizer_class
from .torch_variants import TORCH_VARIANTS, optimizer_class, torch_implementations

__all__ = [
    "CandidateError",
    "Implementation",
    "Stepper",
    "TORCH_VARIANTS",
    "candidate_implementation",
    "load_optimizer_class",
    "optimizer_class",
    "torch_implementations",
]
