"""``conventions``: the reference's options that model the class's fixed conventions, which its constructor does
not take (a class constant, a documented variant): merged into the reference's options, never into the candidate's
constructor. Default ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping

from optbench.adapters.registry import CandidateSpecError, adapter_key


@adapter_key("conventions")
def parse(value, source: str) -> dict:
    if not isinstance(value or {}, Mapping):
        raise CandidateSpecError(f"{source}: conventions must be a mapping")
    return dict(value or {})
