"""``fixed``: constructor arguments every build gets, never over a hyperparameter set's own value. A string
``torch.float32`` (a torch dtype's name) is that dtype; ``param.dtype`` is the dtype of the parameters the optimizer
is built on, at each build. Default ``{}``.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from optbench.adapters.registry import CandidateSpecError, adapter_key

PARAM_DTYPE = "param.dtype"


def _dtype_or_value(value):
    """``torch.float32`` (a string naming a torch dtype) is that dtype, anything else itself."""
    if isinstance(value, str) and value.startswith("torch.") and isinstance(getattr(torch, value[6:], None),
                                                                             torch.dtype):
        return getattr(torch, value[6:])
    return value


@adapter_key("fixed")
def parse(value, source: str) -> dict:
    if not isinstance(value or {}, Mapping):
        raise CandidateSpecError(f"{source}: fixed must be a mapping")
    return {str(k): _dtype_or_value(v) for k, v in (value or {}).items()}


def resolved(kwargs: Mapping, groups: list[dict]) -> dict:
    """Constructor arguments with ``param.dtype`` replaced by the parameters' dtype."""
    if PARAM_DTYPE not in [v for v in kwargs.values() if isinstance(v, str)]:
        return dict(kwargs)
    listed = [g["params"].values() if isinstance(g["params"], Mapping) else g["params"] for g in groups]
    tensors = [p[1] if isinstance(p, tuple) else p for params in listed for p in params]
    tensors = [t for t in tensors if isinstance(t, torch.Tensor)]
    dtype = tensors[0].dtype if tensors else torch.get_default_dtype()
    return {k: dtype if isinstance(v, str) and v == PARAM_DTYPE else v for k, v in kwargs.items()}
