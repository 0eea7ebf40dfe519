"""Blockwise quantization to a map of entries (Dettmers et al., 2022, "8-bit Optimizers via Block-wise Quantization",
arXiv:2110.02861), in float64: the format bitsandbytes' 8-bit optimizers and torchao's 8-bit and 4-bit ones keep
their state in.

A tensor is flattened and cut into blocks of ``blocksize`` consecutive elements (the last block may be short). A
block keeps its absolute maximum ``absmax``; each element is divided by it, which puts it in [-1, 1], and is stored
as the index (uint8) of the nearest of the 256 entries of a sorted map ``code``. Dequantizing multiplies the entry
by the block's absmax. bitsandbytes' 8-bit optimizers use blocks of 256 elements, the signed dynamic map for the
first moment and the unsigned one for the second; ``bitsandbytes.functional.quantize_blockwise`` defaults to 4096.

At the edges: a value exactly halfway between two entries takes the lower index (bitsandbytes compares against
the midpoints with a strict ``<``); a block whose absmax is 0 stores index 0 throughout, as bitsandbytes' kernels
do (any entry times 0 dequantizes to 0). Inputs are assumed finite.

torchao's low-bit optimizers (``torchao.optim``, 0.18) keep a block's scale as its absmax floored at float32's 1e-12
and round a tie up (``ties="up"``, ``floor=FLOOR_1E12``): the 8-bit ones in blocks of 256 with the same two maps,
the 4-bit ones (Li et al., 2023, "Memory Efficient Optimizers with 4-bit States", arXiv:2309.01507) in blocks of 128
with the 4-bit dynamic map for the first moment and ``linear_map(16)``, which has no zero, for the second, two codes
per byte (``pack_nibbles``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOOR_1E12 = float(np.float32(1e-12))  # torchao's scale floor, clip(1e-12) on a float32 absmax: 9.99999996e-13


def _float32_linspace(start: float, end: float, steps: int) -> np.ndarray:
    """float32 points from start to end as torch.linspace spaces them: a float32 step, each point computed from its
    nearer end and rounded once (the float64 sum is exact here, so it stands in for a fused multiply-add)."""
    start32, end32 = np.float32(start), np.float32(end)
    step = (end32 - start32) / np.float32(steps - 1)
    i = np.arange(steps, dtype=np.float64)
    from_start = np.float64(start32) + i * np.float64(step)
    from_end = np.float64(end32) - (steps - 1 - i) * np.float64(step)
    return np.where(i < steps // 2, from_start, from_end).astype(np.float32)


def dynamic_map(signed: bool = True, bits: int = 8) -> np.ndarray:
    """The 2^bits entries of the dynamic (tree) data type, ascending, as float64 values of float32 numbers.

    A code is a sign bit (signed map only), then a run of e zero bits that selects the decade 10^-e, a 1 bit that
    ends the run, and the bits left over, a linear fraction: with 7 bits after the sign, decade 10^-e (e = 0..6)
    has 2^(6-e) fractions, the midpoints of 2^(6-e) equal bins of [0.1, 1], scaled by 10^-e. So precision is fine
    near 0 (one entry, 5.5e-7, in the lowest decade) and coarse near 1 (64 entries in [0.1, 1)). The unsigned map
    spends the sign bit on the fraction: 2^(7-e) fractions per decade. Two entries lie outside the pattern: 0 and
    1.0. Signed: 127 negatives, 0, 127 positives and 1.0, so it is symmetric except that its negative end is
    -0.99296875, not -1. Unsigned: 0, 254 positives and 1.0. With ``bits=4`` (3 bits after the sign: torchao's
    4-bit first moment) the decades are 10^-2..1 with 1, 2 and 4 fractions: +-0.0055, 0.0325, 0.0775, 0.2125,
    0.4375, 0.6625, 0.8875, then 0 and 1.0.

    Rounded as bitsandbytes' ``create_dynamic_map`` builds it: float32 bin edges (``_float32_linspace``), float32
    midpoints, a float32 product with float32(10^-e). It then equals that map bit for bit; the exact decimal values
    differ from it by up to 2 float32 ulps.
    """
    exponent_bits = bits - 1  # every bit after the sign may extend the run of zeros (both libraries' maps)
    magnitudes = []
    for e in range(exponent_bits):
        fractions = 2 ** (exponent_bits - 1 - e + (0 if signed else 1))
        edges = _float32_linspace(0.1, 1.0, fractions + 1)
        midpoints = (edges[:-1] + edges[1:]) / np.float32(2)
        magnitudes.append(midpoints * np.float32(10.0 ** -e))
    positive = np.concatenate(magnitudes).astype(np.float64)
    negative = -positive if signed else np.empty(0)
    return np.sort(np.concatenate([negative, positive, [0.0, 1.0]]))


def linear_map(entries: int = 16) -> np.ndarray:
    """``entries`` evenly spaced values k / entries for k = 1..entries, ascending: torchao's 4-bit map for the
    second moment (torch.linspace(0, 1, 17) without its 0: a small second moment rounds up to 1/16 of its block's
    absmax, never to 0, whose reciprocal square root would blow the update up; Li et al. 2023, Section 4.1)."""
    return np.arange(1, entries + 1, dtype=np.float64) / entries


def pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """4-bit codes (values 0..15, an even count) two to a byte, flattened: the first of each pair in the high
    nibble, as torchao's 4-bit state stores them."""
    flat = np.asarray(codes, dtype=np.uint8).ravel()
    return (flat[0::2] << 4) | flat[1::2]


def unpack_nibbles(packed: np.ndarray) -> np.ndarray:
    """The inverse of ``pack_nibbles``: the flattened 4-bit codes."""
    packed = np.asarray(packed, dtype=np.uint8).ravel()
    return np.stack([packed >> 4, packed & 0x0F], axis=-1).ravel()


@dataclass(frozen=True)
class Blocks:
    """How a quantizer cuts a tensor and scales its blocks: ``size`` elements a block, its tie rule (``down``: the
    lower entry, bitsandbytes; ``up``: torchao) and the floor of a block's scale. Wherever a ``blocksize`` is taken,
    a Blocks may be given instead (an int is ``Blocks(int)``: bitsandbytes' rules)."""

    size: int
    ties: str = "down"
    floor: float = 0.0

    def __index__(self) -> int:
        return self.size

    __int__ = __index__


def _per_element(absmax: np.ndarray, size: int, blocksize: int | Blocks) -> np.ndarray:
    """The absmax of each element's block, for the flattened tensor of ``size`` elements."""
    return np.repeat(np.asarray(absmax, dtype=np.float64), int(blocksize))[:size]


def _normalized(x: np.ndarray, absmax: np.ndarray, blocksize: int) -> np.ndarray:
    """x / absmax of its block, flattened; 0 where the block's absmax is 0."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    scale = _per_element(absmax, flat.size, blocksize)
    return np.divide(flat, scale, out=np.zeros_like(flat), where=scale != 0)


def _boundaries(code: np.ndarray) -> np.ndarray:
    """Decision boundaries: the midpoints between adjacent entries of the sorted map (exact in float64 for
    float32 entries)."""
    code = np.asarray(code, dtype=np.float64)
    return (code[:-1] + code[1:]) / 2


def block_absmax(x: np.ndarray, blocksize: int) -> np.ndarray:
    """max |x| over each block of ``blocksize`` consecutive elements of the flattened x (the last may be short)."""
    flat = np.abs(np.asarray(x, dtype=np.float64).ravel())
    starts = np.arange(0, flat.size, int(blocksize))
    return np.maximum.reduceat(flat, starts) if flat.size else np.empty(0)


def quantize_blockwise(x: np.ndarray, code: np.ndarray, blocksize: int | Blocks, ties: str | None = None,
                       floor: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(codes, absmax): codes (uint8, x's shape) index the entry of ``code`` nearest to x / absmax of its block,
    on an exact tie the lower index (``ties="down"``, bitsandbytes) or the upper one (``"up"``, torchao); absmax
    (float64) holds one max |x| per block, at least ``floor`` (torchao's ``FLOOR_1E12``: a block of zeros then
    stores the entry nearest 0, not index 0). ``ties`` and ``floor`` default to ``blocksize``'s (a Blocks)."""
    rules = blocksize if isinstance(blocksize, Blocks) else Blocks(int(blocksize))
    ties = rules.ties if ties is None else ties
    floor = rules.floor if floor is None else floor
    if ties not in ("down", "up"):
        raise ValueError(f"ties={ties!r}: down or up")
    absmax = np.maximum(block_absmax(x, blocksize), floor)
    normalized = _normalized(x, absmax, blocksize)
    # side="left" counts the boundaries strictly below the value (a tie goes down), "right" those at or below it
    codes = np.searchsorted(_boundaries(code), normalized, side="left" if ties == "down" else "right")
    codes[_per_element(absmax, normalized.size, blocksize) == 0] = 0
    return codes.astype(np.uint8).reshape(np.shape(x)), absmax


def dequantize_blockwise(codes: np.ndarray, absmax: np.ndarray, code: np.ndarray, blocksize: int) -> np.ndarray:
    """code[codes] times the absmax of each element's block, in float64, shaped as codes."""
    entries = np.asarray(code, dtype=np.float64)[np.asarray(codes).ravel()]
    return (entries * _per_element(absmax, entries.size, blocksize)).reshape(np.shape(codes))


def boundary_margin(x: np.ndarray, code: np.ndarray, absmax: np.ndarray, blocksize: int) -> np.ndarray:
    """Per element (x's shape), the distance from x / absmax of its block to the nearest decision boundary of
    ``code``, in those normalized units; inf in a block whose absmax is 0, where every code dequantizes to 0.

    A code one off the reference's is rounding, not an error, only where this margin is within the rounding of
    the arithmetic that normalized the value."""
    normalized = _normalized(x, absmax, blocksize)
    boundaries = _boundaries(code)
    above = np.searchsorted(boundaries, normalized).clip(0, boundaries.size - 1)
    below = (above - 1).clip(0, boundaries.size - 1)
    margin = np.minimum(np.abs(normalized - boundaries[above]), np.abs(normalized - boundaries[below]))
    margin[_per_element(absmax, normalized.size, blocksize) == 0] = np.inf
    return margin.reshape(np.shape(x))


def disagreement_distance(x: np.ndarray, codes: np.ndarray, other: np.ndarray, code: np.ndarray, absmax: np.ndarray,
                          blocksize: int) -> np.ndarray:
    """Per element (x's shape), how far from x / absmax of its block the farthest decision boundary lies among
    those between the entries ``codes`` and ``other`` pick; 0 where they agree.

    Off by one, it is the distance to the one boundary the two codes share. Another implementation's code is
    explained by rounding its normalized value only where this is within that rounding."""
    normalized = _normalized(x, absmax, blocksize)
    mine, theirs = np.asarray(codes).ravel().astype(np.int64), np.asarray(other).ravel().astype(np.int64)
    boundaries = _boundaries(code)
    first = np.minimum(mine, theirs).clip(0, boundaries.size - 1)
    last = (np.maximum(mine, theirs) - 1).clip(0, boundaries.size - 1)
    distance = np.maximum(np.abs(normalized - boundaries[first]), np.abs(normalized - boundaries[last]))
    return np.where(mine == theirs, 0.0, distance).reshape(np.shape(x))
