"""``group_schedule``: ``true`` when the candidate's schedule (step, warmup, averaging weights) is per param group and
advances only on steps where the group has a gradient (heavyball's SFAdamW): loaded into other groups, its
continuation is another computation, so round-trips that regroup are skipped, saying why. Default ``false``.
"""

from __future__ import annotations

from optbench.adapters.registry import CandidateSpecError, adapter_key


@adapter_key("group_schedule")
def parse(value, source: str) -> bool:
    if not isinstance(value, bool):
        raise CandidateSpecError(f"{source}: group_schedule={value!r}: true or false")
    return value
