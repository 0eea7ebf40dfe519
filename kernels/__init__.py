"""Implementations under test: torch's own variants and user candidates, behind one interface."""

from .implementation import Implementation, Stepper
from .candidate import candidate_implementation, load_candidate_class
from .torch_variants import TORCH_VARIANTS, torch_implementations

__all__ = [
    "Implementation",
    "Stepper",
    "TORCH_VARIANTS",
    "candidate_implementation",
    "load_candidate_class",
    "torch_implementations",
]
