"""The checks, as a registry: each turns cases into result rows through ``checks.base.Check``.

Registry order is run order within a group of cases (parity before cross, which reads its
trajectories). ``optbench run checks=[...]`` picks by name; a check's ``requires`` must be picked with
it (``checks=[cross]`` alone is a usage error naming parity: ``engine.selection.resolve_checks``).
"""

from __future__ import annotations

from optbench.checks.base import Check
from optbench.checks.cross import CrossCheck
from optbench.checks.deviations import DeviationsCheck
from optbench.checks.differentiable import DifferentiableCheck
from optbench.checks.error_inputs import ErrorsCheck
from optbench.checks.forms import FormsCheck
from optbench.checks.memory import MemoryCheck
from optbench.checks.parity import ParityCheck
from optbench.checks.reshard import ReshardCheck
from optbench.checks.roundtrip import RoundTripCheck
from optbench.checks.scaling import ScalingCheck
from optbench.checks.speed import SpeedCheck

REGISTRY: dict[str, Check] = {c.name: c for c in (ParityCheck(), CrossCheck(), FormsCheck(), DeviationsCheck(),
                                                   RoundTripCheck(), ErrorsCheck(), DifferentiableCheck(), SpeedCheck(),
                                                   MemoryCheck(), ScalingCheck(), ReshardCheck())}

__all__ = ["REGISTRY", "Check"]
