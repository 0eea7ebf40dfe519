"""``held_as``: options the library holds at a lower precision than the float64 its documentation writes them in,
e.g. ``{betas: float32, lr: float32}`` (it keeps them in float32 tensors): the reference gets each such value rounded
to that dtype first, so the departure that rounding alone makes (``1 - fl32(0.999)`` is 108 float64 eps from
``1 - 0.999``) is not taken for a bug, and the rest of the step is still judged at full tolerance. Default ``{}``;
a dtype that is not float32, bfloat16 or float16 is a usage error before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from optbench.adapters.registry import CandidateSpecError, adapter_key

PRECISIONS = ("float32", "bfloat16", "float16")


@adapter_key("held_as")
def parse(value, source: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise CandidateSpecError(f"{source}: held_as: a mapping of the reference's option to a dtype, e.g. "
                                 "{betas: float32}")
    bad = {str(k): str(v) for k, v in value.items() if str(v) not in PRECISIONS}
    if bad:
        option, dtype = next(iter(bad.items()))
        raise CandidateSpecError(f"{source}: held_as: {option}: {dtype} is none of {', '.join(PRECISIONS)}")
    return {str(k): str(v) for k, v in value.items()}


def _rounded(value, dtype: torch.dtype):
    if isinstance(value, (list, tuple)):
        return type(value)(_rounded(v, dtype) for v in value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(torch.tensor(float(value), dtype=torch.float64).to(dtype).double())
    return value


def held(hp: dict, spec) -> dict:
    """``hp`` (a parameter's options as the reference takes them) with each option the spec's ``held_as`` names
    rounded to its dtype; ``hp`` itself where there are none."""
    precision = (spec.extra or {}).get("held_as") if spec is not None else None
    if not precision:
        return hp
    return {k: _rounded(v, getattr(torch, precision[k])) if k in precision else v for k, v in hp.items()}
