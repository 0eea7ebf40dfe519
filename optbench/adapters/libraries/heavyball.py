"""State decoder for heavyball 3.x optimizers (``state: {decode: optbench.adapters.libraries.heavyball.flat}``).

heavyball keeps each parameter's state under a view index (``state[p] = {0: {...}}``; more than one view only with
``merge_dims``) and names every tensor ``<transform>_<name>_<transform index>`` (``update_by_adam_exp_avg_0``,
``scale_by_exp_avg_sq_exp_avg_sq_0``, ``update_by_schedule_free_z_1``). ``flat`` reads that as the transform's own
name (``exp_avg``, ``exp_avg_sq``, ``z``), leaves out its bookkeeping (``is_initialized``; ``step``, which it keeps
on one parameter per group only: the adapter reads the group's ``step_count``) and keeps any other key as it is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

BOOKKEEPING = {"is_initialized", "step"}
_INDEXED = re.compile(r"^(?P<stem>.+)_(?P<index>\d+)$")


@functools.cache
def _stems() -> dict[str, str]:
    """``<transform>_<name>`` -> ``name`` for every state-keeping transform heavyball.chainable defines."""
    from heavyball import chainable

    stems = {}
    for value in vars(chainable).values():
        transform = value
        while isinstance(transform, chainable.FunctionTransform):
            for name in transform.names:
                stems[f"{transform.fn_name}_{name}"] = name
            transform = transform.fn
    return stems


def flat(state: Mapping) -> dict:
    """One parameter's heavyball state as ``{name: tensor}`` (see the module docstring)."""
    views = [v for k, v in state.items() if isinstance(k, int)]
    if len(views) > 1:
        raise ValueError(f"heavyball state split over {len(views)} views (merge_dims): not one tensor per name")
    inner = views[0] if views else {k: v for k, v in state.items()}
    out = {}
    for key, value in inner.items():
        key = str(key)
        if key in BOOKKEEPING or key.endswith("::ecc"):
            continue
        match = _INDEXED.match(key)
        out[_stems().get(match["stem"], key) if match else key] = value
    return out
