"""ScaledAdam mutants: optbench's own ScaledAdam (``kernels/scaled_adam.py``) with one bug each, and a control.

Each mutant subclasses the per-tensor ``ScaledAdam`` (so it takes exactly its constructor arguments) and wraps
one piece of it: the clipping factor, or the hyperparameters its math reads.
"""

from __future__ import annotations

from optbench.kernels.scaled_adam import BatchedScaledAdam, ScaledAdam, update


class CorrectScaledAdam(ScaledAdam):
    """Control: optbench's per-tensor ScaledAdam (no bug)."""


class CorrectBatchedScaledAdam(BatchedScaledAdam):
    """Control: optbench's batched ScaledAdam (no bug)."""


class NoClippingScaledAdam(ScaledAdam):
    """Bug: never clips (the clipping factor is always 1): shows once a threshold exists (clipping sets)."""

    @staticmethod
    def _clipping_factor(group, clipping, units):
        return 1.0


class SquaredBeta2ScaledAdam(ScaledAdam):
    """Bug: the second moment decays with beta2**2 instead of beta2."""

    @staticmethod
    def _update(p, g, s, t, group):
        beta1, beta2 = group["betas"]
        return update(p, g, s, t, {**group, "betas": (beta1, beta2 * beta2)})


class UnboundedRmsScaledAdam(ScaledAdam):
    """Bug: the update is relative to param_rms without the param_min_rms floor (rms_bounds set)."""

    @staticmethod
    def _update(p, g, s, t, group):
        return update(p, g, s, t, {**group, "param_min_rms": 0.0})


MUTANTS = {"NoClippingScaledAdam": "scaledadam", "SquaredBeta2ScaledAdam": "scaledadam",
           "UnboundedRmsScaledAdam": "scaledadam"}
CONTROLS = {"CorrectScaledAdam": "scaledadam", "CorrectBatchedScaledAdam": "scaledadam"}
