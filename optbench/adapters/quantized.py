"""``quantized``: where the candidate keeps its optimizer state quantized, and how to read it, e.g. bitsandbytes'
8-bit optimizers::

    quantized:
      scheme: blockwise_8bit       # block-wise dynamic 8-bit state (reference/_quantization.py)
      blocksize: 256               # elements per absmax
      min_size: 4096               # a parameter of fewer elements keeps 32-bit state (judged by the parity check)
      moments:                     # the reference's moment -> the candidate's state keys: [codes, absmax, map]
        exp_avg: [state1, absmax1, qmap1]
        exp_avg_sq: [state2, absmax2, qmap2]   # in the suite's quantized step's order (Lion: exp_avg alone)
      grid: 65536                  # optional: the quantizer first rounds to this many points on [-1, 1]
      ties: down                   # optional: a value halfway between two entries takes the lower (down, the
                                   # default: bitsandbytes) or the upper one (up: torchao)
      floor: 0                     # optional: a block's scale is at least this (as a float32): torchao's 1e-12
      whole_blocks: false          # optional: only a parameter of whole blocks keeps quantized state (torchao)
      full_precision: bitsandbytes.optim.AdamW   # optional: the library's full-precision class of the algorithm:
                                   # the round-trip loads this one's state into it and its state into this one

The other schemes, torchao's (``torchao.optim.AdamW4bit``, ``AdamWFp8``)::

    scheme: blockwise_4bit         # 4-bit codes, two a byte, the first in the high nibble (a flat uint8 tensor);
                                   # the 4-bit dynamic map (signed moment) or linear_map(16) (the second moment)
    scheme: blockwise_fp8          # E4M3FN codes (float8_e4m3fn, the parameter's shape), a scale per block,
    moments: {exp_avg: [exp_avg.codes, exp_avg.scale], ...}   # absmax / 448, and no map: [codes, scale]

A key may index a stacked state tensor: ``state1[0]`` is the first of the moments bitsandbytes' AdEMAMix8bit keeps
stacked in ``state1`` (``absmax1[0]`` its absmax), ``state1[1]`` the second; or name an attribute of a state tensor:
``exp_avg.codes`` is the ``codes`` of the tensor subclass torchao keeps ``exp_avg`` in (``exp_avg.scale`` its
per-block scales, ``exp_avg.qmap`` its map).

A parameter of at least ``min_size`` elements is judged by the quantized check, one step at a time from the
candidate's own quantized state, in the quantizer's units; the parity check judges the others (``full_precision``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import torch

from optbench.adapters.registry import CandidateSpecError, adapter_key, reject_unknown
from optbench.reference._float8 import MAX as FP8_MAX
from optbench.reference._float8 import map_index, normalized_map
from optbench.reference._quantization import Blocks, unpack_nibbles

KEYS = {"scheme", "blocksize", "min_size", "moments", "grid", "ties", "floor", "whole_blocks", "full_precision"}
# state1, state1[0] (the first of a stacked tensor) or exp_avg.codes (an attribute of a tensor subclass)
STATE_KEY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:\[(?P<index>\d+)\]|\.(?P<attr>[A-Za-z_][A-Za-z0-9_]*))?")
SCHEMES = ("blockwise_8bit", "blockwise_4bit", "blockwise_fp8")
KEYS_PER_MOMENT = {"blockwise_fp8": 2}  # [codes, scale]: an FP8 code is its own value (no map); the others 3
CODE_BYTES = {"blockwise_8bit": 1.0, "blockwise_4bit": 0.5, "blockwise_fp8": 1.0}  # a code's storage per element


@adapter_key("quantized")
def parse(value, source: str) -> dict:
    if not isinstance(value, Mapping):
        raise CandidateSpecError(f"{source}: quantized: a mapping of {', '.join(sorted(KEYS))}")
    reject_unknown(value, KEYS, f"{source}: quantized")
    scheme = str(value.get("scheme", ""))
    if scheme not in SCHEMES:
        raise CandidateSpecError(f"{source}: quantized.scheme={scheme or '(none)'}: one of {', '.join(SCHEMES)}")
    try:
        blocksize, min_size = int(value.get("blocksize", 256)), int(value.get("min_size", 0))
    except (TypeError, ValueError):
        raise CandidateSpecError(f"{source}: quantized.blocksize and min_size: whole numbers") from None
    moments, per_moment = value.get("moments") or {}, KEYS_PER_MOMENT.get(scheme, 3)
    if blocksize < 1 or min_size < 0 or not isinstance(moments, Mapping) or not moments or not all(
            isinstance(keys, (list, tuple)) and len(keys) == per_moment for keys in moments.values()):
        raise CandidateSpecError(f"{source}: quantized: blocksize >= 1, min_size >= 0 and moments (the reference's "
                                 "name of each -> its " + ("[codes, scale]" if per_moment == 2 else
                                                           "[codes, absmax, map]") + " state keys)")
    bad = [str(k) for keys in moments.values() for k in keys if not STATE_KEY.fullmatch(str(k))]
    if bad:
        raise CandidateSpecError(f"{source}: quantized.moments: {bad[0]!r} is no state key (a name, name[i] for "
                                 "the i-th of a stacked tensor, or name.attribute of a tensor subclass)")
    grid = value.get("grid")
    if grid is not None and (not isinstance(grid, int) or grid < 2):
        raise CandidateSpecError(f"{source}: quantized.grid={grid}: a whole number of points, at least 2")
    ties, floor, whole = str(value.get("ties", "down")), value.get("floor", 0), value.get("whole_blocks", False)
    if ties not in ("down", "up") or isinstance(floor, bool) or not isinstance(floor, (int, float)) or floor < 0 \
            or not isinstance(whole, bool):
        raise CandidateSpecError(f"{source}: quantized: ties down or up, floor a number >= 0, whole_blocks true or "
                                 "false")
    full = value.get("full_precision")
    if full is not None and not (isinstance(full, str) and "." in full):
        raise CandidateSpecError(f"{source}: quantized.full_precision={full!r}: a class's dotted path")
    return {"scheme": scheme, "blocksize": blocksize, "min_size": min_size, "grid": grid, "ties": ties,
            "floor": float(np.float32(floor)), "whole_blocks": whole, "full_precision": full,
            "moments": {str(m): tuple(str(k) for k in keys) for m, keys in moments.items()}}


def full_precision_class(spec) -> str | None:
    """The dotted path of the library's full-precision class the spec names (``quantized.full_precision``), or
    None."""
    return (declared(spec) or {}).get("full_precision")


def blocks(q: dict) -> Blocks:
    """How the declared quantizer cuts and scales (the reference quantizer's ``Blocks``)."""
    return Blocks(q["blocksize"], q.get("ties", "down"), q.get("floor", 0.0))


def declared(spec) -> dict | None:
    """The spec's ``quantized`` block (None: its state is not quantized)."""
    return (spec.extra or {}).get("quantized") if spec is not None else None


def quantizes(spec, numel: int) -> bool:
    """Whether a parameter of ``numel`` elements keeps quantized state under ``spec``."""
    q = declared(spec)
    return q is not None and numel >= q["min_size"] and numel > 0 and not (
        q.get("whole_blocks") and numel % q["blocksize"])


def full_precision(spec, workload):
    """``workload`` without the parameters whose state ``spec`` quantizes (the quantized check judges those)."""
    return workload.restricted(lambda s: not quantizes(spec, s.numel)) if declared(spec) else workload


def read(spec, state: Mapping, shape: tuple) -> dict | None:
    """One parameter's (of ``shape``) quantized state as the reference's step takes it: per declared moment ``k`` (in
    the spec's order, from 1), ``codes<k>`` (uint8 indices of ``map<k>``, of ``shape``: 4-bit codes unpacked, FP8
    codes as the index of their value in ``normalized_map``), ``absmax<k>`` (what multiplies the map: an FP8 scale
    times 448) and ``map<k>`` (float64 NumPy), and ``step``; None where it holds none yet (before its first step) or
    not the scheme's quantized state (a float tensor where the codes should be, packed codes of another size)."""
    q = declared(spec)
    out: dict = {}
    for k, keys in enumerate(q["moments"].values(), start=1):
        entries = [_entry(state, key) for key in keys]
        if not all(isinstance(t, torch.Tensor) for t in entries):
            return None
        decoded = _decoded(q["scheme"], entries, shape)
        if decoded is None:
            return None
        out[f"codes{k}"], out[f"absmax{k}"], out[f"map{k}"] = decoded
    step = state.get("step")
    out["step"] = int(step.item() if isinstance(step, torch.Tensor) else step or 0)
    return out


def _decoded(scheme: str, entries: list, shape: tuple) -> tuple | None:
    """(codes, absmax, map) of one moment (its state tensors ``entries``: codes, scale and, but for FP8, the map) as
    NumPy, the codes as indices of the map in the parameter's ``shape`` (None: not the scheme's codes)."""
    codes, scale, *qmap = entries
    absmax = scale.detach().double().cpu().numpy().reshape(-1)
    if scheme == "blockwise_fp8":
        if codes.dtype != torch.float8_e4m3fn or tuple(codes.shape) != tuple(shape):
            return None
        bits = codes.detach().cpu().contiguous().view(torch.uint8).numpy()
        return map_index(bits), absmax * FP8_MAX, normalized_map()
    if codes.dtype != torch.uint8:
        return None
    found = codes.detach().cpu().numpy().copy()
    if scheme == "blockwise_4bit":
        numel = int(np.prod(shape, dtype=np.int64))
        if found.size * 2 != numel:
            return None
        found = unpack_nibbles(found).reshape(shape)
    return found, absmax, qmap[0].detach().double().cpu().numpy().reshape(-1)


def as_arrays(quantized: dict) -> dict:
    """``read``'s state as tape data (the step as a 0-d array)."""
    return {k: np.asarray(v) for k, v in quantized.items()}


def _entry(state: Mapping, key: str):
    """``state[key]``, or for ``name[i]`` the i-th of the stacked tensor ``state[name]`` (None where it has none)."""
    found = STATE_KEY.fullmatch(key)
    value = state.get(found["name"])
    if found["attr"] is not None:
        return getattr(value, found["attr"], None) if isinstance(value, torch.Tensor) else None
    if found["index"] is None or not isinstance(value, torch.Tensor):
        return value
    index = int(found["index"])
    return value[index] if value.dim() > 0 and index < value.shape[0] else None
