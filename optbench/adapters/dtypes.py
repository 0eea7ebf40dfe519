"""``dtypes``: the parameter dtypes the candidate documents it supports, e.g. ``[float32, bfloat16]`` (a library
whose optimizer computes in float32 only). At any other dtype a run takes, its cases are skipped, saying so, not
errors. Default: every dtype the suite runs. A name that is no torch dtype is a usage error before anything runs.
"""

from __future__ import annotations

import torch

from optbench.adapters.registry import CandidateSpecError, adapter_key


@adapter_key("dtypes")
def parse(value, source: str) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else list(value or ())
    bad = [str(n) for n in names if not isinstance(getattr(torch, str(n), None), torch.dtype)]
    if bad or not names:
        raise CandidateSpecError(f"{source}: dtypes: {', '.join(bad) or 'an empty list'}: need torch dtype names, "
                                 "e.g. [float32, bfloat16]")
    return tuple(str(n) for n in names)


def unsupported(spec, dtype: torch.dtype) -> str:
    """Why the candidate does not run at ``dtype`` ("" if it does): a dtype its spec's ``dtypes:`` leaves out."""
    declared = (spec.extra or {}).get("dtypes") if spec is not None else None
    name = str(dtype).removeprefix("torch.")
    if declared and name not in declared:
        return f"its candidate spec supports {', '.join(declared)} only (dtypes:)"
    return ""
