"""Stochastic rounding to bfloat16: the reference's distribution (reference/_stochastic_rounding.py) and the judge in
distribution (optbench/numerics/stochastic_rounding.py), which an honest rounding passes and biased ones fail;
torchao's own rounding where torchao is installed."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from optbench.numerics.stochastic_rounding import detectable_bias, judge
from optbench.reference._stochastic_rounding import bfloat16_neighbours, expectation

DRAWS = 4000


def values(n: int = 1024, seed: int = 0) -> np.ndarray:
    """float32 values over many binades and both signs (parameters after an update), a few already bfloat16."""
    rng = np.random.default_rng(seed)
    v = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 2, n)).astype(np.float32)
    v[:8] = v[:8].astype(ml_dtypes.bfloat16).astype(np.float32)
    return v


def test_the_neighbours_bracket_the_value_and_the_expectation_is_the_value():
    v = np.concatenate([values(), [1.0, -1.0, 1e-40, -3.0e-39, 0.0]]).astype(np.float32).astype(np.float64)
    toward, away, p = bfloat16_neighbours(v)
    as_bf16 = lambda a: a.astype(ml_dtypes.bfloat16).astype(np.float64)  # noqa: E731
    assert np.array_equal(as_bf16(toward), toward) and np.array_equal(as_bf16(away), away)
    assert np.all(np.abs(toward) <= np.abs(v)) and np.all(np.abs(v) < np.abs(away))
    assert np.all((0 <= p) & (p < 1)) and np.array_equal(expectation(v), v)
    assert np.all(p[:8] == 0)  # already bfloat16: rounds to itself
    one = bfloat16_neighbours(np.array([1.0 + 2 ** -9]))
    assert [float(a[0]) for a in one] == [1.0, 1.0 + 2 ** -7, 0.25]


def rounded(v: np.ndarray, rule, draws: int = DRAWS, seed: int = 1) -> np.ndarray:
    """``draws`` roundings of the float32 values by ``rule`` (bits, random 16-bit ints -> bits), as float64."""
    g = torch.Generator().manual_seed(seed)
    bits = torch.from_numpy(v).view(torch.int32).expand(draws, -1)
    rand = torch.randint(0, 1 << 16, bits.shape, generator=g, dtype=torch.int32)
    return rule(bits, rand).view(torch.float32).bfloat16().double().numpy()


def honest(bits, rand):  # the carry from the low 16 bits happens with probability fraction / 2^16
    return (bits + rand) & -65536


RULES = {
    "to nearest (deterministic)": lambda bits, rand: bits.view(torch.float32).bfloat16().float().view(torch.int32),
    "toward zero (truncation)": lambda bits, rand: bits & -65536,
    "8 random bits (fraction cut to 1/256)": lambda bits, rand: torch.where(
        (rand >> 8) < ((bits & 0xFFFF) >> 8), (bits & -65536) + 65536, bits & -65536),
    "away with twice the probability": lambda bits, rand: torch.where(
        rand < 2 * (bits & 0xFFFF), (bits & -65536) + 65536, bits & -65536),
    "the neighbour two steps away": lambda bits, rand: torch.where(
        rand < (bits & 0xFFFF), (bits & -65536) + 2 * 65536, bits & -65536),
}


def test_an_honest_stochastic_rounding_passes():
    v = values()
    verdict = judge(v, rounded(v, honest))
    assert verdict.passed, verdict.detail


@pytest.mark.parametrize("rule", list(RULES))
def test_a_biased_or_wrong_rounding_fails(rule):
    v = values()
    verdict = judge(v, rounded(v, RULES[rule]))
    assert not verdict.passed, verdict.detail


def test_the_overall_test_sees_a_bias_no_single_element_shows_and_says_its_limit():
    v = values()
    verdict = judge(v, rounded(v, RULES["8 random bits (fraction cut to 1/256)"]))
    assert verdict.failing_elements == 0 and verdict.bias_z < -5, verdict.detail
    assert 1e-4 < detectable_bias(v, DRAWS) < 2e-3


def test_torchaos_bfloat16_stochastic_rounding_passes():
    quant_utils = pytest.importorskip("torchao.optim.quant_utils")
    v = values()
    torch.manual_seed(0)
    draws = np.stack([quant_utils._fp32_to_bf16_sr(torch.from_numpy(v)).double().numpy() for _ in range(DRAWS)])
    verdict = judge(v, draws)
    assert verdict.passed, verdict.detail
