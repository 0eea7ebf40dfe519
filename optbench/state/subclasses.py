"""State held in tensor subclasses that wrap plain tensors, read as those tensors.

torchao's low-bit optimizers keep each moment as a tensor subclass (``OptimState8bit``: ``codes``, ``scale``,
``qmap``; the 4-bit and FP8 ones alike), as its float8 and NF4 tensors do: what they hold is their inner tensors,
named by torch's own protocol for such subclasses (``__tensor_flatten__``, the one ``torch.compile`` and
distributed checkpointing rely on). Comparing, copying to NumPy or reading the dtype of the subclass itself
dispatches to whatever the library implemented (``torch.equal`` is not; ``.to(float64)`` only changes the dtype
it shows). The harness reads them as their inner tensors instead, keyed ``key.attr`` (``exp_avg.codes``), the
naming the candidate spec's ``quantized.moments`` uses: a round trip then compares codes and scales bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

PLAIN = (torch.Tensor, torch.nn.Parameter)


def wraps_tensors(value) -> bool:
    """Whether ``value`` is a tensor subclass that wraps others (it implements ``__tensor_flatten__``)."""
    return isinstance(value, torch.Tensor) and type(value) not in PLAIN and hasattr(value, "__tensor_flatten__")


def inner_tensors(value) -> dict[str, torch.Tensor] | None:
    """``{attr: inner tensor}`` of a tensor subclass that wraps others (nested ones flattened, ``attr.inner``);
    None for a plain tensor or anything else."""
    if not wraps_tensors(value):
        return None
    names, _ = value.__tensor_flatten__()
    out: dict[str, torch.Tensor] = {}
    for attr in names:
        inner = getattr(value, attr)
        nested = inner_tensors(inner)
        out.update({f"{attr}.{k}": v for k, v in nested.items()} if nested is not None else {attr: inner})
    return out


def context(value):
    """What a wrapping subclass holds besides its tensors (``__tensor_flatten__``'s second part: torchao's
    ``signed`` and shown dtype), with its type and shape."""
    return type(value), tuple(value.shape), value.__tensor_flatten__()[1]


def plain_state(state: Mapping) -> dict:
    """One parameter's state, each wrapping subclass replaced by its inner tensors keyed ``key.attr`` (``state``
    itself where it holds none: the common case, on every step's snapshot)."""
    if not any(wraps_tensors(value) for value in state.values()):
        return state
    out: dict = {}
    for key, value in state.items():
        inner = inner_tensors(value)
        out.update({f"{key}.{attr}": t for attr, t in inner.items()} if inner is not None else {key: value})
    return out
