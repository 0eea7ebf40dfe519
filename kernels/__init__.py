"""Implementations under test: torch's own variants, user candidates and optbench's own kernels
(ScaledAdam per-tensor and batched on a BatchedOptimizer base; a fast Adafactor), behind one interface."""

from .implementation import Implementation, Stepper
from .batched import BATCH_NAMES, Batch, BatchedOptimizer
from .scaled_adam import BatchedScaledAdam, ScaledAdam
from .candidate import CandidateError, candidate_implementation, load_optimizer_class
from .graphed import GraphedStep
from .master_weights import MasterWeights, master_variants, with_master_weights
from .torch_variants import TORCH_VARIANTS, optimizer_class, torch_implementations

__all__ = [
    "BATCH_NAMES",
    "Batch",
    "BatchedOptimizer",
    "BatchedScaledAdam",
    "ScaledAdam",
    "CandidateError",
    "GraphedStep",
    "Implementation",
    "MasterWeights",
    "Stepper",
    "TORCH_VARIANTS",
    "candidate_implementation",
    "load_optimizer_class",
    "master_variants",
    "optimizer_class",
    "torch_implementations",
    "with_master_weights",
]
