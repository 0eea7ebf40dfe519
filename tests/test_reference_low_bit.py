"""The low-bit formats' references beyond bitsandbytes' 8-bit: the 4-bit maps and nibble packing, the tie and floor
rules of torchao's quantizer (reference/_quantization.py) and E4M3FN with its blockwise scale (reference/_float8.py),
checked against their definitions and torch's float8 conversion; then against torchao's own quantizers where
torchao is installed, bit for bit but where a value lies within float32 rounding of a decision boundary."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from optbench.reference import _float8 as f8
from optbench.reference._quantization import (
    FLOOR_1E12,
    boundary_margin,
    dequantize_blockwise,
    dynamic_map,
    linear_map,
    pack_nibbles,
    quantize_blockwise,
    unpack_nibbles,
)

FLOAT32_ROUNDING = 2.0 ** -22  # a float32 quotient x / scale in [-1, 1] is within this of the exact one


def test_the_4bit_dynamic_map_has_three_decades_of_one_two_and_four_fractions():
    magnitudes = [0.0055, 0.0325, 0.0775, 0.2125, 0.4375, 0.6625, 0.8875]
    expected = np.array(sorted([-m for m in magnitudes] + magnitudes + [0.0, 1.0]))
    assert dynamic_map(True, bits=4).shape == (16,)
    np.testing.assert_allclose(dynamic_map(True, bits=4), expected, rtol=2 ** -22)
    assert dynamic_map(True).shape == (256,) and np.array_equal(dynamic_map(True, bits=8), dynamic_map(True))


def test_the_4bit_second_moment_map_is_sixteen_even_steps_without_zero():
    assert np.array_equal(linear_map(16), np.arange(1, 17) / 16)
    codes, _ = quantize_blockwise(np.zeros(128), linear_map(16), 128, ties="up", floor=FLOOR_1E12)
    assert np.all(codes == 0)  # a zero second moment is stored as 1/16 of its block's (floored) scale


def test_nibbles_pack_the_first_of_a_pair_high_and_unpack_to_the_same_codes():
    codes = np.random.default_rng(0).integers(0, 16, 256).astype(np.uint8)
    packed = pack_nibbles(codes)
    assert packed.shape == (128,) and packed[0] == (codes[0] << 4 | codes[1])
    assert np.array_equal(unpack_nibbles(packed), codes)


@pytest.mark.parametrize("ties, index", [("down", 0), ("up", 1)])
def test_a_value_halfway_between_two_entries_takes_the_index_its_tie_rule_says(ties, index):
    code = np.array([0.0, 0.5, 1.0])
    codes, _ = quantize_blockwise(np.array([0.25, 1.0]), code, 2, ties=ties)  # 0.25 / absmax 1.0: halfway
    assert codes[0] == index


def test_a_floor_on_the_scale_turns_a_block_of_zeros_into_the_entry_nearest_zero():
    signed = dynamic_map(True)
    bare, _ = quantize_blockwise(np.zeros(256), signed, 256)
    floored, scale = quantize_blockwise(np.zeros(256), signed, 256, ties="up", floor=FLOOR_1E12)
    assert np.all(bare == 0) and np.all(signed[floored] == 0.0) and scale[0] == FLOOR_1E12


def test_float8_codes_decode_as_torchs_float8_e4m3fn():
    codes = np.arange(256, dtype=np.uint8)
    theirs = torch.from_numpy(codes).view(torch.float8_e4m3fn).double().numpy()
    assert np.array_equal(f8.decode(codes), theirs, equal_nan=True)
    assert f8.decode(np.array([0x7E, 0x01, 0x08], dtype=np.uint8)).tolist() == [448.0, 2.0 ** -9, 2.0 ** -6]


def float8_probes() -> np.ndarray:
    """Random values over the whole range, every tie between two codes (both signs), the saturating range, zeros."""
    rng = np.random.default_rng(0)
    ties = (f8._MAGNITUDES[:-1] + f8._MAGNITUDES[1:]) / 2
    spread = rng.standard_normal(50_000) * 10 ** rng.uniform(-4, 2.7, 50_000)
    return np.concatenate([spread, ties, -ties, [449.0, 463.9, 464.0, 1000.0, 0.0, -0.0, 1e-30]])


def torch_float8(x: np.ndarray) -> np.ndarray:
    return torch.from_numpy(np.asarray(x, dtype=np.float64)).to(torch.float8_e4m3fn).view(torch.uint8).numpy()


def test_float8_encoding_is_torchs_ties_to_even_and_saturation_included():
    x = float8_probes()
    assert np.array_equal(f8.encode(x), torch_float8(x))


def test_a_float8_encoder_that_rounds_ties_up_is_told_apart():
    x = float8_probes()
    ties_up = np.where((np.abs(x) > 0) & (f8.boundary_margin(x, np.array([1.0])) == 0), 1, 0)
    wrong = f8.encode(x) + ties_up * (f8.encode(x) % 2 == 0)  # ties to the odd neighbour above: off by one
    assert np.count_nonzero(wrong.astype(np.uint8) != torch_float8(x)) > 100


def test_float8_blockwise_maps_each_blocks_largest_to_448_and_dequantizes_within_half_a_step():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 256)) * np.array([[1e-6], [1.0], [1e3], [0.0]])
    codes, scale = f8.quantize_blockwise(x, 256)
    assert np.all(np.max(codes[:3] & 0x7F, axis=1) == 0x7E) and scale[3] == FLOOR_1E12 / 448
    back = f8.dequantize_blockwise(codes, scale)
    assert np.all(np.abs(back - x) <= np.abs(x) * 2.0 ** -4 + scale[:, None] * 2.0 ** -10)  # 3 mantissa bits
    with pytest.raises(ValueError, match="whole blocks"):
        f8.quantize_blockwise(np.zeros(300), 256)


# --- torchao's own quantizers (torchao.optim, 0.18) -------------------------------------------------------------


def torchao_quantizers():
    return pytest.importorskip("torchao.optim.quant_utils")


def torchao_map(bits: int, signed: bool) -> torch.Tensor:
    """The map torchao's state of ``bits`` bits keeps a moment in (its own, not the reference's)."""
    module = pytest.importorskip(f"torchao.optim.subclass_{bits}bit")
    return torch.tensor(module.get_qmap_signed() if signed else module.get_qmap_unsigned(), dtype=torch.float32)


def sample(size: int, signed: bool, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(size) * 10 ** rng.uniform(-6, 2, size)).astype(np.float32)
    x = x if signed else x * x
    x[: size // 8] = 0.0  # a block of zeros
    return x


def agree_but_for_rounding(x, ours, theirs, code, scale, blocksize) -> None:
    off = np.nonzero(ours != theirs)[0]
    margin = boundary_margin(x, code, scale, blocksize).ravel()
    assert np.all(np.abs(ours[off].astype(int) - theirs[off].astype(int)) == 1), "more than one code apart"
    assert np.all(margin[off] <= FLOAT32_ROUNDING), margin[off].max()


@pytest.mark.parametrize("signed", [True, False])
def test_torchaos_8bit_codes_are_the_references_with_ties_up_and_a_floored_scale(signed):
    q = torchao_quantizers()
    x = sample(256 * 64, signed)
    scaled, scale = q.scale_tensor(torch.from_numpy(x), 256)
    theirs = q.quantize_8bit_with_qmap(scaled, torchao_map(8, signed)).numpy()
    assert np.array_equal(torchao_map(8, signed).double().numpy(), dynamic_map(signed))
    ours, absmax = quantize_blockwise(x, dynamic_map(signed), 256, ties="up", floor=FLOOR_1E12)
    np.testing.assert_allclose(absmax, scale.double().numpy(), rtol=0)
    agree_but_for_rounding(x, ours.ravel(), theirs.ravel(), dynamic_map(signed), absmax, 256)


@pytest.mark.parametrize("signed", [True, False])
def test_torchaos_4bit_codes_are_the_references_on_its_two_maps(signed):
    q = torchao_quantizers()
    code = dynamic_map(True, bits=4) if signed else linear_map(16)
    x = sample(128 * 64, signed)
    scaled, scale = q.scale_tensor(torch.from_numpy(x), 128)
    theirs = q.quantize_4bit_with_qmap(scaled, torchao_map(4, signed)).numpy()
    assert np.array_equal(torchao_map(4, signed).double().numpy(), code)
    ours, absmax = quantize_blockwise(x, code, 128, ties="up", floor=FLOOR_1E12)
    agree_but_for_rounding(x, ours.ravel(), theirs.ravel(), code, absmax, 128)
    assert np.array_equal(unpack_nibbles(pack_nibbles(theirs)), theirs.ravel())
    theirs_back = q.dequant_with_qmap(torch.from_numpy(ours), torchao_map(4, signed), scale).double().numpy()
    np.testing.assert_allclose(dequantize_blockwise(ours, absmax, code, 128), theirs_back, rtol=2 ** -23, atol=0)


def test_torchaos_fp8_codes_are_the_references_e4m3fn_of_the_scaled_block():
    pytest.importorskip("torchao.optim.subclass_fp8")
    from torchao.optim.subclass_fp8 import quantize_fp8

    x = sample(256 * 64, True)
    codes, scale = quantize_fp8(torch.from_numpy(x), 256)
    theirs = codes.view(torch.uint8).numpy().ravel()
    ours, reference_scale = f8.quantize_blockwise(x, 256)
    np.testing.assert_allclose(scale.double().numpy(), reference_scale, rtol=2 ** -23)
    off = np.nonzero(ours.ravel() != theirs)[0]
    margin = f8.boundary_margin(x, reference_scale).ravel()
    assert np.all(margin[off] <= 448 * FLOAT32_ROUNDING), margin[off].max()  # float32 rounding at the scaled size
