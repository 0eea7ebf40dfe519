"""The 8-bit block-wise AdamW step reference (reference/_blockwise_8bit_step.py), judged one step at a time from
bitsandbytes' own quantized state: in the quantizer's units, bitsandbytes' CPU AdamW8bit agrees with it, and each
deliberately wrong reference (a wrong beta, one absmax for the whole tensor, the unsigned map for the signed moment,
the previous step's absmax, the moment left unquantized) does not."""

from __future__ import annotations

import numpy as np
import pytest

from optbench.reference._blockwise_8bit_step import BLOCKSIZE, adamw_step, code_disagreements
from optbench.reference._quantization import dequantize_blockwise, dynamic_map, quantize_blockwise

torch = pytest.importorskip("torch")
bnb = pytest.importorskip("bitsandbytes")

SHAPE, STEPS = (64, 128), 8  # 8192 elements: past min_8bit_size (4096), so the state is 8-bit
HP = {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.1}
EPS32 = float(np.finfo(np.float32).eps)
PARAM_EPS = 8  # the new parameter, in float32 eps of itself: two roundings of it and the update's float32 arithmetic
# a differing code is explained where its value lies this close to a boundary between the two codes (normalized
# units): bitsandbytes' CPU quantizer rounds to a 65536-point grid first (F67's cause), and its moments are float32
ROUNDING = 1 / 65535 + 2.0 ** -20
ABSMAX_EPS = 2  # the new absmax, in float32 eps of itself: the max of float32 moments


def _state(optimizer, p) -> dict:
    """bitsandbytes' state of ``p`` as the reference reads it (before the first step: zero moments)."""
    st = optimizer.state.get(p) or {}
    if not st:
        return {"step": 0, "codes1": np.full(SHAPE, 127, np.uint8), "absmax1": np.zeros(32),
                "map1": dynamic_map(True), "codes2": np.zeros(SHAPE, np.uint8), "absmax2": np.zeros(32),
                "map2": dynamic_map(False)}
    return {"step": st["step"], "codes1": st["state1"].numpy().copy(), "absmax1": st["absmax1"].double().numpy(),
            "map1": st["qmap1"].double().numpy(), "codes2": st["state2"].numpy().copy(),
            "absmax2": st["absmax2"].double().numpy(), "map2": st["qmap2"].double().numpy()}


@pytest.fixture(scope="module")
def recorded():
    """bitsandbytes' AdamW8bit over STEPS steps, rows of different gradient scales: per step (parameter before,
    gradient, state before, parameter after, state after)."""
    gen = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.randn(SHAPE, generator=gen))
    scales = 10.0 ** (torch.rand(SHAPE[0], 1, generator=gen) * 4 - 3)
    optimizer = bnb.optim.AdamW8bit([p], lr=HP["lr"], betas=HP["betas"], eps=HP["eps"],
                                    weight_decay=HP["weight_decay"])
    steps = []
    for _ in range(STEPS):
        before, state = p.detach().double().numpy().copy(), _state(optimizer, p)
        p.grad = torch.randn(SHAPE, generator=gen) * scales
        optimizer.step()
        steps.append((before, p.grad.double().numpy(), state, p.detach().double().numpy().copy(),
                      _state(optimizer, p)))
    return steps


def worst(recorded, step=adamw_step) -> dict:
    """The worst of each comparison over the recorded steps, ``step`` taken from bitsandbytes' state each time."""
    out = {"param_eps": 0.0, "unexplained": 0, "absmax_eps": 0.0, "differ": 0}
    for before, grad, state, after, theirs in recorded:
        p, ours = step(before, grad, state, HP)
        out["param_eps"] = max(out["param_eps"], float((np.abs(after - p) / (EPS32 * np.maximum(
            np.abs(p), np.abs(p - before)))).max()))
        for k, moment in ((1, "exp_avg"), (2, "exp_avg_sq")):
            differ, unexplained, _ = code_disagreements(ours[moment], theirs[f"codes{k}"], ours[f"codes{k}"],
                                                        ours[f"map{k}"], ours[f"absmax{k}"], ROUNDING)
            out["differ"] += differ
            out["unexplained"] += unexplained
            absmax = np.abs(theirs[f"absmax{k}"] - ours[f"absmax{k}"]) / (EPS32 * np.abs(ours[f"absmax{k}"]))
            out["absmax_eps"] = max(out["absmax_eps"], float(absmax.max()))
    return out


def test_bitsandbytes_cpu_adamw8bit_agrees_in_the_quantizers_units(recorded):
    got = worst(recorded)
    assert got["param_eps"] <= PARAM_EPS and got["absmax_eps"] <= ABSMAX_EPS, got
    assert got["unexplained"] == 0 and got["differ"] > 0, got  # codes off by its rounding only (and some are)


def _wrong_beta(param, grad, state, hp):
    return adamw_step(param, grad, state, {**hp, "betas": (0.9, 0.99)})


def _per_tensor_absmax(param, grad, state, hp):
    p, new = adamw_step(param, grad, state, hp)
    for k, moment in ((1, "exp_avg"), (2, "exp_avg_sq")):
        codes, absmax = quantize_blockwise(new[moment].ravel(), new[f"map{k}"], new[moment].size)
        new[f"codes{k}"], new[f"absmax{k}"] = codes.reshape(SHAPE), np.repeat(absmax, new[f"absmax{k}"].size)
    return p, new


def _unsigned_first_moment(param, grad, state, hp):
    p, new = adamw_step(param, grad, state, hp)
    new["codes1"], new["absmax1"] = quantize_blockwise(np.abs(new["exp_avg"]), dynamic_map(False), BLOCKSIZE)
    return p, new


def _stale_absmax(param, grad, state, hp):
    p, new = adamw_step(param, grad, state, hp)
    if state["step"]:  # quantized with the absmax the step began with
        for k, moment in ((1, "exp_avg"), (2, "exp_avg_sq")):
            scale = np.repeat(state[f"absmax{k}"], BLOCKSIZE)[:new[moment].size].reshape(SHAPE)
            normalized = np.clip(new[moment] / scale, -1, 1)
            new[f"codes{k}"], _ = quantize_blockwise(normalized, new[f"map{k}"], new[moment].size)
            new[f"absmax{k}"] = state[f"absmax{k}"]
    return p, new


def _unquantized_moment(param, grad, state, hp):
    """The first moment kept in full precision between steps: the next step starts from it, not from the codes."""
    kept = getattr(_unquantized_moment, "kept", None)
    if state["step"] == 0 or kept is None:
        p, new = adamw_step(param, grad, state, hp)
    else:
        full = {**state, "codes1": np.full(SHAPE, 127, np.uint8), "absmax1": np.zeros_like(state["absmax1"])}
        p, new = adamw_step(param, grad, full, hp)
        beta1 = hp["betas"][0]
        m = beta1 * kept + (1 - beta1) * grad
        p = p + hp["lr"] / (1 - beta1 ** new["step"]) * (new["exp_avg"] - m) / (
            np.sqrt(new["exp_avg_sq"]) / np.sqrt(1 - hp["betas"][1] ** new["step"]) + hp["eps"])
        new["exp_avg"] = m
        new["codes1"], new["absmax1"] = quantize_blockwise(m, state["map1"], BLOCKSIZE)
    _unquantized_moment.kept = new["exp_avg"]
    return p, new


@pytest.mark.parametrize("mutant", [_wrong_beta, _per_tensor_absmax, _unsigned_first_moment, _stale_absmax,
                                    _unquantized_moment])
def test_a_wrong_reference_fails_the_same_comparison(recorded, mutant):
    _unquantized_moment.kept = None
    got = worst(recorded, mutant)
    assert (got["param_eps"] > PARAM_EPS or got["unexplained"] > 0.01 * 2 * STEPS * np.prod(SHAPE)
            or got["absmax_eps"] > ABSMAX_EPS), (mutant.__name__, got)


def test_dequantized_state_is_what_the_step_starts_from():
    """The reference reads bitsandbytes' own codes: a state it quantized dequantizes to what it held, within a code."""
    m = np.random.default_rng(0).standard_normal(SHAPE)
    codes, absmax = quantize_blockwise(m, dynamic_map(True), BLOCKSIZE)
    back = dequantize_blockwise(codes, absmax, dynamic_map(True), BLOCKSIZE)
    assert np.abs(back - m).max() <= 0.07 * np.abs(m).max()  # the coarsest gap of the map near 1, half of it
