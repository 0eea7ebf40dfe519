"""State decoder for bitsandbytes' AdEMAMix (``state: {decode: optbench.adapters.libraries.bitsandbytes.ademamix}``).

bitsandbytes 0.50.x keeps AdEMAMix's two EMAs of the gradient in one buffer, ``state1`` of shape ``(2, *p.shape)``
(``init_state``: "we use `state` to hold both the fast and slow EMAs"): ``state1[0]`` the fast EMA m1, ``state1[1]``
the slow EMA m2; ``state2`` the second moment nu. ``ademamix`` reads them under the reference's names (``exp_avg``,
``exp_avg_slow``, ``exp_avg_sq``) and keeps every other key (``step``) as it is. 8-bit state (``uint8`` buffers
with their ``qmap``/``absmax``) is left as it is: it is not a float EMA to compare.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch


def ademamix(state: Mapping) -> dict:
    """One parameter's bitsandbytes AdEMAMix state as ``{name: tensor}`` (see the module docstring)."""
    out = dict(state)
    both = out.get("state1")
    if isinstance(both, torch.Tensor) and both.is_floating_point() and both.dim() >= 1 and both.shape[0] == 2:
        del out["state1"]
        out["exp_avg"], out["exp_avg_slow"] = both[0], both[1]
    if isinstance(out.get("state2"), torch.Tensor) and out["state2"].is_floating_point():
        out["exp_avg_sq"] = out.pop("state2")
    return out
