"""Mutants of the 8-bit quantizer itself, on the catalogue's 8-bit AdamW (``blockwise_8bit.NumpyAdamW8bit``, its step
the reference's): each steps AdamW right and stores its moments wrong in one way the quantized check must catch, in
bitsandbytes' layout (codes, an absmax per block of 256, the maps). The float64 step and its moments are the
reference's; only the quantization differs."""

from __future__ import annotations

import numpy as np

from optbench.mutants.blockwise_8bit import _ADAMW_SPEC, NumpyAdamW8bit
from optbench.reference._blockwise_8bit_step import BLOCKSIZE, adamw_step
from optbench.reference._quantization import quantize_blockwise

MOMENTS = ((1, "exp_avg"), (2, "exp_avg_sq"))


def _requantized(new: dict, quantize) -> dict:
    """``new`` with each moment's codes and absmax from ``quantize(k, moment values, its map)``."""
    for k, moment in MOMENTS:
        new[f"codes{k}"], new[f"absmax{k}"] = quantize(k, new[moment], new[f"map{k}"])
    return new


class PerTensorAbsmaxAdamW8bit(NumpyAdamW8bit):
    """Mutant: one absmax for the whole tensor (written in every block's slot), not one per block of 256."""

    def _step8(self, p, hp: dict):
        def step(param, grad, state, hp):
            new_p, new = adamw_step(param, grad, state, hp)
            blocks = -(-new["exp_avg"].size // BLOCKSIZE)

            def whole(k, x, qmap):
                codes, absmax = quantize_blockwise(x.ravel(), qmap, x.size)
                return codes.reshape(x.shape), np.repeat(absmax, blocks)
            return new_p, _requantized(new, whole)
        self._step_two_moments(p, step, hp)


class Blocks512AdamW8bit(NumpyAdamW8bit):
    """Mutant: blocks of 512 elements where its spec (and bitsandbytes) says 256 (each scale written twice, in the
    layout of 256)."""

    def _step8(self, p, hp: dict):
        def step(param, grad, state, hp):
            new_p, new = adamw_step(param, grad, state, hp)
            blocks = -(-new["exp_avg"].size // BLOCKSIZE)

            def wide(k, x, qmap):
                codes, absmax = quantize_blockwise(x, qmap, 2 * BLOCKSIZE)
                return codes, np.repeat(absmax, 2)[:blocks]
            return new_p, _requantized(new, wide)
        self._step_two_moments(p, step, hp)


class StaleAbsmaxAdamW8bit(NumpyAdamW8bit):
    """Mutant: after its first step it quantizes the new moments with the absmax the step began with (values past
    it clamp to the map's end), not a fresh one."""

    def _step8(self, p, hp: dict):
        def step(param, grad, state, hp):
            new_p, new = adamw_step(param, grad, state, hp)
            if not state["step"]:
                return new_p, new

            def stale(k, x, qmap):
                scale = np.repeat(state[f"absmax{k}"], BLOCKSIZE)[:x.size].reshape(x.shape)
                normalized = np.clip(np.divide(x, scale, out=np.zeros_like(x), where=scale > 0), -1, 1)
                codes, _ = quantize_blockwise(normalized, qmap, x.size)
                return codes, state[f"absmax{k}"]
            return new_p, _requantized(new, stale)
        self._step_two_moments(p, step, hp)


class UnquantizedMomentAdamW8bit(NumpyAdamW8bit):
    """Mutant: its first moment kept in full precision between steps (its codes written, never read back): the next
    step starts from the float moment, not from what the codes hold."""

    def _step8(self, p, hp: dict):
        kept = getattr(self, "_kept", {})
        self._kept = kept

        def step(param, grad, state, hp):
            new_p, new = adamw_step(param, grad, state, hp)
            if id(p) in kept:
                (beta1, beta2), t = hp["betas"], new["step"]
                m = beta1 * kept[id(p)] + (1 - beta1) * grad
                denom = np.sqrt(new["exp_avg_sq"]) / np.sqrt(1 - beta2 ** t) + hp["eps"]
                new_p = param * (1 - hp["lr"] * hp["weight_decay"]) - hp["lr"] / (1 - beta1 ** t) * m / denom
                new["exp_avg"] = m
                new["codes1"], new["absmax1"] = quantize_blockwise(m, new["map1"], BLOCKSIZE)
            kept[id(p)] = new["exp_avg"]
            return new_p, new
        self._step_two_moments(p, step, hp)


MUTANTS = dict.fromkeys(["PerTensorAbsmaxAdamW8bit", "Blocks512AdamW8bit", "StaleAbsmaxAdamW8bit",
                         "UnquantizedMomentAdamW8bit"], "adamw")
EXISTS_AT = dict.fromkeys(MUTANTS, ("float32",))
CAUGHT_BY = dict.fromkeys(MUTANTS, "quantized")
SPECS = dict.fromkeys(MUTANTS, _ADAMW_SPEC)
