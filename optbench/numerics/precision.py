"""Which precision each parameter and optimizer-state tensor is kept in, as result rows.

Parity records, per case, the dtype of every tensor it compared, read before the float64 snapshot
converts it: ``(fqn, "param" | state key)`` (and ``(fqn, "model")`` where the optimizer steps float32
master copies of the model's parameters). A result row per state key says it: metric ``state.dtype``,
``detail`` the dtype's name, ``value`` its bits per element; ``fqn`` is empty when every parameter
keeps that key in the same dtype, else there is one row per FQN.
"""

from __future__ import annotations

import numpy as np
import torch

from optbench.metrics import STATE_DTYPE
from optbench.results import row
from optbench.state.batched import per_parameter_state
from optbench.state.subclasses import plain_state

PYTHON_BITS = {"python float": 64, "python int": 64}


def dtype_name(value) -> str | None:
    """``float32``, ``bfloat16``, ... for tensors and arrays; ``python float`` / ``python int`` for
    numbers; None for anything parity does not compare."""
    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.")
    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "fiuc":
        return value.dtype.name
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return "python int"
    if isinstance(value, float):
        return "python float"
    return None


def kept_in(optimizer: torch.optim.Optimizer, stepped: dict[str, torch.Tensor],
            model: dict[str, torch.Tensor] | None = None) -> dict[tuple[str, str], str]:
    """(fqn, tensor) -> dtype name of what the optimizer steps and its state; with ``model`` other
    than ``stepped`` (master copies), also the model's own parameters as (fqn, "model")."""
    out, states = {}, per_parameter_state(optimizer)
    for name, p in stepped.items():
        out[(name, "param")] = dtype_name(p)
        if model is not None and model is not stepped:
            out[(name, "model")] = dtype_name(model[name])
        for key, value in plain_state(states.get(p, {})).items():
            if (kind := dtype_name(value)) is not None:
                out[(name, key)] = kind
    return out


def bits(name: str) -> int:
    if name in PYTHON_BITS:
        return PYTHON_BITS[name]
    dtype = getattr(torch, name, None)
    return dtype.itemsize * 8 if isinstance(dtype, torch.dtype) else np.dtype(name).itemsize * 8


def precision_rows(labels: dict, kept: dict[tuple[str, str], str]) -> list[dict]:
    """``state.dtype`` rows: one per tensor key, or one per FQN for a key kept in several dtypes."""
    by_key: dict[str, dict[str, str]] = {}
    for (fqn, key), name in kept.items():
        by_key.setdefault(key, {})[fqn] = name
    rows = []
    for key, per_fqn in by_key.items():
        names = set(per_fqn.values())
        spread = per_fqn.items() if len(names) > 1 else [("", next(iter(names)))]
        rows += [row(labels, check="parity", metric=STATE_DTYPE, value=bits(name), unit="bits", fqn=fqn, tensor=key,
                     detail=name) for fqn, name in spread]
    return rows
