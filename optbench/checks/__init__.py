"""The checks, as a registry (``checks.registry``): each turns cases into result rows through ``checks.base.Check``
and registers itself with ``@register_check``: its config block, whether a plain run selects it, whether it times,
its report sections and its summary entry.

Registry order is run order within a group of cases (parity before cross, which reads its
trajectories). ``optbench run checks=[...]`` picks by name; a check's ``requires`` must be picked with
it (``checks=[cross]`` alone is a usage error naming parity: ``engine.selection.resolve_checks``).
"""

from __future__ import annotations

import optbench.plugins as plugins
from optbench.checks import (  # noqa: F401  (importing a check's module registers it)
    cross,
    deviations,
    differentiable,
    error_inputs,
    forms,
    memory,
    parity,
    quantized,
    reshard,
    roundtrip,
    scaling,
    speed,
    stochastic,
)
from optbench.checks.base import Check
from optbench.checks.registry import REGISTRATIONS, REGISTRY, arrange, register_check, unregister

# run order within a group of cases: parity first (cross and forms read its trajectories), the timed ones last
arrange(["parity", "cross", "forms", "deviations", "roundtrip", "errors", "quantized", "stochastic", "differentiable",
         "speed",
         "memory", "scaling", "reshard"])
plugins.load("optbench.checks")  # other packages' checks (optbench.plugins), after the built-in ones

__all__ = ["REGISTRATIONS", "REGISTRY", "Check", "register_check", "unregister"]
