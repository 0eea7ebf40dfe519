"""``group_options``: options every param group the harness builds carries, for a class that reads a flag per group
and refuses groups without it (pytorch-optimizer's Muon: ``use_muon``, true for the matrices it orthogonalizes).
Never the reference's; a hyperparameter set's own group option of that name wins. Default ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping

from optbench.adapters.registry import CandidateSpecError, adapter_key


@adapter_key("group_options")
def parse(value, source: str) -> dict:
    if not isinstance(value or {}, Mapping):
        raise CandidateSpecError(f"{source}: group_options must be a mapping of option: value")
    options = {str(k): v for k, v in (value or {}).items()}
    if "params" in options:
        raise CandidateSpecError(f"{source}: group_options: params is the parameters, never an option")
    return options


def carried(options: Mapping, group: dict) -> dict:
    """``group`` with ``options`` under its own."""
    return {**options, **group}
