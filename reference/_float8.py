"""The 8-bit float E4M3FN (OCP 8-bit Floating Point spec, 2023: "E4M3"; PyTorch's ``float8_e4m3fn``) and blockwise
FP8 quantization with it, in float64: the format torchao's ``AdamWFp8`` keeps both moments in.

A code is a sign bit, 4 exponent bits (bias 7) and 3 mantissa bits. Exponent 0 holds the subnormals m/8 * 2^-6
(the smallest 2^-9); exponents 1..15 the normals (1 + m/8) * 2^(E-7). There is no infinity: S.1111.111 is NaN, so
the largest finite value is S.1111.110 = 448. A value rounds to the nearest code, a tie to the one whose mantissa
is even (round to nearest even); past 448 it saturates to 448, as PyTorch's conversion does (``Tensor.to``, from
float32, float64 or bfloat16; the spec leaves saturation to the conversion).

Blockwise (torchao's ``quantize_fp8``): a tensor is cut into blocks of ``blocksize`` consecutive elements; a block's
scale is max(absmax, 1e-12) / 448 (1e-12 as a float32: ``FLOOR_1E12``), so its largest element maps to 448, and each
element is stored as the code of element / scale. Inputs are assumed finite.
"""

from __future__ import annotations

import numpy as np

from ._quantization import FLOOR_1E12

MAX = 448.0
NAN_CODE = 0x7F  # S.1111.111 (either sign)


def decode(codes: np.ndarray) -> np.ndarray:
    """The float64 value of each E4M3FN code (uint8 bit patterns), NaN for the two NaN codes."""
    codes = np.asarray(codes, dtype=np.uint8).astype(np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent, mantissa = (codes >> 3) & 0x0F, codes & 0x07
    magnitude = np.where(exponent == 0, mantissa / 8 * 2.0 ** -6, (1 + mantissa / 8) * 2.0 ** (exponent - 7))
    return np.where((codes & 0x7F) == NAN_CODE, np.nan, sign * magnitude)


_MAGNITUDES = decode(np.arange(NAN_CODE, dtype=np.uint8))  # codes 0x00..0x7E: 0, ..., 448, ascending


def encode(x: np.ndarray) -> np.ndarray:
    """The E4M3FN code (uint8) of each value: the nearest, a tie to the even mantissa, 448 past it; -0.0 keeps its
    sign."""
    x = np.asarray(x, dtype=np.float64)
    magnitude = np.abs(x).ravel()
    above = np.searchsorted(_MAGNITUDES, magnitude, side="left").clip(1, _MAGNITUDES.size - 1)
    below = above - 1
    gap_below, gap_above = magnitude - _MAGNITUDES[below], _MAGNITUDES[above] - magnitude
    tie_to_above = (gap_above == gap_below) & (above % 2 == 0)  # a code's last bit is its mantissa's last bit
    code = np.where((gap_above < gap_below) | tie_to_above, above, below)
    code = np.where(magnitude > MAX, NAN_CODE - 1, code)  # saturated: 0x7E, 448
    return (code | np.where(np.signbit(x.ravel()), 0x80, 0)).astype(np.uint8).reshape(x.shape)


def quantize_blockwise(x: np.ndarray, blocksize: int, floor: float = FLOOR_1E12) -> tuple[np.ndarray, np.ndarray]:
    """(codes, scale): the E4M3FN code of each element divided by its block's scale (x's shape), and the scale per
    block, max(absmax, ``floor``) / 448 (float64). The tensor's size is a multiple of ``blocksize`` (torchao
    quantizes no other)."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    if flat.size % blocksize:
        raise ValueError(f"{flat.size} elements are not whole blocks of {blocksize}")
    blocks = flat.reshape(-1, blocksize)
    scale = np.maximum(np.abs(blocks).max(axis=1), floor) / MAX
    return encode(blocks / scale[:, None]).reshape(np.shape(x)), scale


def dequantize_blockwise(codes: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Each code's value times its block's scale (float64, the codes' shape)."""
    blocks = decode(codes).reshape(np.asarray(scale).size, -1)
    return (blocks * np.asarray(scale, dtype=np.float64)[:, None]).reshape(np.shape(codes))


def boundary_margin(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per element (x's shape), the distance from x / scale of its block to the nearest rounding boundary (the
    midpoint between two adjacent codes' magnitudes), in those scaled units: a code one off the reference's is
    rounding only where this is within the rounding of the arithmetic that scaled the value."""
    flat = np.asarray(x, dtype=np.float64).ravel()
    scaled = np.abs(flat.reshape(np.asarray(scale).size, -1) / np.asarray(scale, dtype=np.float64)[:, None]).ravel()
    midpoints = (_MAGNITUDES[:-1] + _MAGNITUDES[1:]) / 2
    above = np.searchsorted(midpoints, scaled).clip(0, midpoints.size - 1)
    below = (above - 1).clip(0, midpoints.size - 1)
    return np.minimum(np.abs(scaled - midpoints[above]), np.abs(scaled - midpoints[below])).reshape(np.shape(x))


# The codes as a sorted map (for the block-wise machinery of ``_quantization``): the 253 distinct finite values,
# -448 .. -2^-9, 0, 2^-9 .. 448, over 448, so that a block's absmax (scale x 448) multiplies them as it multiplies
# a dynamic map's entries. Rounding x / absmax to the nearest entry is rounding x / scale to the nearest code (a
# tie aside: the map's tie rule, not the even mantissa).
_NEGATIVE = np.arange(0xFE, 0x80, -1, dtype=np.uint8)  # -448 .. -2^-9, ascending
_POSITIVE = np.arange(0x00, NAN_CODE, dtype=np.uint8)  # 0, 2^-9 .. 448
_SORTED_CODES = np.concatenate([_NEGATIVE, _POSITIVE])
_INDEX = np.full(256, 255, dtype=np.uint8)  # NaN codes: 255, an index past the map's end
_INDEX[_SORTED_CODES] = np.arange(_SORTED_CODES.size, dtype=np.uint8)
_INDEX[0x80] = _INDEX[0x00]  # -0 is 0


def normalized_map() -> np.ndarray:
    """The distinct finite E4M3FN values over 448, ascending (253 entries, one 0)."""
    return decode(_SORTED_CODES) / MAX


def map_index(codes: np.ndarray) -> np.ndarray:
    """Each E4M3FN code's index in ``normalized_map`` (uint8; -0 is 0's; a NaN code 255, past the map's end)."""
    return _INDEX[np.asarray(codes, dtype=np.uint8)]


def map_codes(indices: np.ndarray) -> np.ndarray:
    """The E4M3FN code of each index of ``normalized_map`` (the inverse of ``map_index``; 0 as +0)."""
    return _SORTED_CODES[np.asarray(indices, dtype=np.int64)]
