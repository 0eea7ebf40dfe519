"""optbench's own optimizers: ScaledAdam per tensor and batched (on a BatchedOptimizer base) and a fast
Adafactor (``optbench.kernels.adafactor``, a C++ extension built on first use)."""

from .batched import BATCH_NAMES, Batch, BatchedOptimizer
from .scaled_adam import BatchedScaledAdam, ScaledAdam

__all__ = ["BATCH_NAMES", "Batch", "BatchedOptimizer", "BatchedScaledAdam", "ScaledAdam"]
