"""u-muP Adam mutants: graphcore's ``unit_scaling.optim.Adam`` with its lr scaling wrong in one place, and a control.

Each mutant is ``unit_scaling.optim.Adam`` (a subclass, so it takes exactly its constructor arguments) whose
parameter groups come from unit_scaling's own public ``scaled_parameters`` with one rule changed; the Adam
step is torch's. Present only where unit-scaling is installed (``pip install "optbench[umup]"``).
"""

from __future__ import annotations

import math

import torch

try:
    import unit_scaling.optim as uo
except ImportError:  # no unit-scaling here: no u-muP mutants
    uo = None

MUTANTS: dict[str, str] = {}
CONTROLS: dict[str, str] = {}

if uo is not None:

    class UmupAdam(uo.Adam):
        """Control: unit_scaling.optim.Adam itself."""

    class _ScaledUmupAdam(uo.Adam):
        """unit_scaling.optim.Adam's constructor, with ``lr_scale`` and the decay's ``groups`` overridable."""

        def __init__(self, params, lr=1e-3, *args, weight_decay=0, independent_weight_decay=True,
                     allow_non_unit_scaling_params=False, **kwargs):
            groups = self.groups(params, lr, weight_decay, independent_weight_decay, allow_non_unit_scaling_params)
            torch.optim.Adam.__init__(self, groups, *args, **kwargs)

        @staticmethod
        def lr_scale(param) -> float:
            return uo.lr_scale_func_adam(param)

        def groups(self, params, lr, weight_decay, independent_weight_decay, allow_non_unit_scaling_params):
            return uo.scaled_parameters(params, self.lr_scale, lr=lr, weight_decay=weight_decay,
                                        independent_weight_decay=independent_weight_decay,
                                        allow_non_unit_scaling_params=allow_non_unit_scaling_params)

    class ReadoutAsHiddenUmupAdam(_ScaledUmupAdam):
        """Bug: the readout (mup_type output) is scaled like a hidden weight, by fan_in ** -0.5 (muP's hidden rule)."""

        @staticmethod
        def lr_scale(param) -> float:
            if param.mup_type == "output":
                return uo.lr_scale_for_depth(param) * math.prod(param.shape[1:]) ** -0.5
            return uo.lr_scale_func_adam(param)

    class LinearDepthUmupAdam(_ScaledUmupAdam):
        """Bug: inside a depth-scaled stack the lr is divided by the depth, not by its square root."""

        @staticmethod
        def lr_scale(param) -> float:
            scale = uo.lr_scale_func_adam(param)
            return scale if param.mup_scaling_depth is None else scale * param.mup_scaling_depth**-0.5

    class DecayOverGroupLrUmupAdam(_ScaledUmupAdam):
        """Bug: independent weight decay divides by the group's lr, not by each parameter's scaled lr."""

        def groups(self, params, lr, weight_decay, independent_weight_decay, allow_non_unit_scaling_params):
            decay = weight_decay / float(lr) if independent_weight_decay else weight_decay
            return uo.scaled_parameters(params, self.lr_scale, lr=lr, weight_decay=decay,
                                        independent_weight_decay=False,
                                        allow_non_unit_scaling_params=allow_non_unit_scaling_params)

    MUTANTS = {"ReadoutAsHiddenUmupAdam": "umup", "LinearDepthUmupAdam": "umup", "DecayOverGroupLrUmupAdam": "umup"}
    CONTROLS = {"UmupAdam": "umup"}
