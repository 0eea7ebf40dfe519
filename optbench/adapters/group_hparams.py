"""``group_hparams``: the reference's options a class reads from each param group alone, never from its constructor
(pytorch-optimizer's Muon steps a group with ``use_muon: false`` by AdamW, whose lr, betas, eps and weight_decay it
takes from the group; its constructor's ``lr`` and ``weight_decay`` are the Muon side's). The reference's default and
the hyperparameter set's value of each go into every param group the harness builds, a group's own value winning,
and none of them to the constructor. Default ``[]``.
"""

from __future__ import annotations

from collections.abc import Mapping

from optbench.adapters.registry import CandidateSpecError, adapter_key

KEY = "group_hparams"


@adapter_key(KEY)
def parse(value, source: str) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else [] if isinstance(value, Mapping) else list(value or ())
    if not all(isinstance(n, str) and n for n in names) or "params" in names or isinstance(value, Mapping):
        raise CandidateSpecError(f"{source}: group_hparams: {value!r}: need option names, e.g. [lr, betas]")
    return tuple(names)


def names_of(spec) -> tuple[str, ...]:
    return tuple(spec.extra.get(KEY, ())) if spec is not None else ()


def into_groups(names: tuple[str, ...], kwargs: dict, groups: list[dict]) -> tuple[dict, list[dict]]:
    """``kwargs`` without ``names``, and ``groups`` each carrying those of them ``kwargs`` held, under its own
    (``kwargs`` and ``groups`` as they came where there are none: a class's own params form, a bare Tensor, stays)."""
    moved = {k: kwargs[k] for k in names if k in kwargs}
    if not moved:
        return kwargs, groups
    rest = {k: v for k, v in kwargs.items() if k not in moved}
    return rest, [{**moved, **g} for g in groups]
