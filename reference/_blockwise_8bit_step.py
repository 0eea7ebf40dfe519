"""One step of an 8-bit block-wise Adam(W) (Dettmers et al., 2022, "8-bit Optimizers via Block-wise Quantization",
arXiv:2110.02861, Algorithm 1), or of Lion (Chen et al., 2023, Algorithm 2) on the same block-wise state, in float64,
or of SGD with momentum (its buffer, signed), RMSprop, Adagrad (one non-negative state), or of any reference from its
dequantized moments (``reference_step``: LAMB, AdEMAMix), taken from the implementation's own quantized state.

The state of an 8-bit optimizer is, per moment, uint8 codes of the parameter's shape, the absolute maximum of each
block of ``blocksize`` consecutive elements, and the map the codes index (``_quantization``: the signed dynamic map
for the first moment, the unsigned one for the second). The same steps take 4-bit and FP8 block-wise state, whose
codes index another sorted map (``scheme_map``; torchao's ``AdamW4bit`` and ``AdamWFp8``). A step dequantizes both
moments, updates them in 32-bit arithmetic (here float64) as Adam does, updates the parameter from the updated
moments, not yet quantized, and quantizes the moments again with a fresh absmax per block. With decoupled weight
decay (AdamW) the parameter first shrinks by ``lr * weight_decay``; the bias corrections are those of Adam (Kingma
and Ba, 2015). Lion keeps one moment (the signed map): it steps by the sign of ``beta1 m + (1 - beta1) g`` from the
dequantized ``m``, then updates ``m`` with ``beta2`` and quantizes it again; where that sum is within rounding of 0
the implementation's sign is its arithmetic's (``decisions``: the sum and the magnitude its rounding scales with, as
in ``lion.decisions``).

Judged one step at a time from the implementation's own state, the comparison is in the quantizer's units: the
parameter's update to float tolerance, the new absmax to float tolerance, and the new codes equal to the
reference's but where the value lies within the implementation's rounding of a decision boundary
(``code_disagreements``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from . import _float8, ademamix, lamb
from ._quantization import dequantize_blockwise, disagreement_distance, dynamic_map, linear_map, quantize_blockwise

BLOCKSIZE = 256  # the block size of the 8-bit optimizers' state (bitsandbytes' optimizers, the paper's Section 2)


def adamw_step(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict, blocksize: int = BLOCKSIZE,
               decoupled: bool = True) -> tuple[np.ndarray, dict]:
    """(the new parameter, the new state) of one AdamW step from ``state``: ``codes1``/``absmax1``/``map1`` (first
    moment), ``codes2``/``absmax2``/``map2`` (second moment) and ``step`` (steps taken before this one); ``hp``:
    ``lr``, ``betas``, ``eps``, ``weight_decay``. ``decoupled`` False: Adam's L2 term instead, ``weight_decay``
    times the parameter added to the gradient before the moments. The new state holds the new codes and absmax and,
    as ``exp_avg``/``exp_avg_sq``, the float64 moments they quantize."""
    beta1, beta2 = (float(b) for b in hp["betas"])
    lr, eps, decay = float(hp["lr"]), float(hp["eps"]), float(hp.get("weight_decay", 0.0))
    step = int(state["step"]) + 1
    g = np.asarray(grad, dtype=np.float64)
    if not decoupled:
        g = g + decay * np.asarray(param, dtype=np.float64)
    m = dequantize_blockwise(state["codes1"], state["absmax1"], state["map1"], blocksize)
    v = dequantize_blockwise(state["codes2"], state["absmax2"], state["map2"], blocksize)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    denom = np.sqrt(v) / np.sqrt(1.0 - beta2 ** step) + eps
    p = np.asarray(param, dtype=np.float64) * (1.0 - lr * decay if decoupled else 1.0)
    p = p - lr / (1.0 - beta1 ** step) * m / denom
    codes1, absmax1 = quantize_blockwise(m, state["map1"], blocksize)
    codes2, absmax2 = quantize_blockwise(v, state["map2"], blocksize)
    return p, {"step": step, "codes1": codes1, "absmax1": absmax1, "map1": state["map1"], "codes2": codes2,
               "absmax2": absmax2, "map2": state["map2"], "exp_avg": m, "exp_avg_sq": v}


def lion_step(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict,
              blocksize: int = BLOCKSIZE) -> tuple[np.ndarray, dict]:
    """(the new parameter, the new state) of one Lion step from ``state``: ``codes1``/``absmax1``/``map1`` (its one
    moment) and ``step``; ``hp``: ``lr``, ``betas``, ``weight_decay`` (decoupled). The new state holds the new codes
    and absmax, the float64 moment they quantize (``exp_avg``) and ``decisions``: [(c, the magnitude of its terms)]
    for the sign each element stepped by."""
    beta1, beta2 = (float(b) for b in hp["betas"])
    lr, decay = float(hp["lr"]), float(hp.get("weight_decay", 0.0))
    g = np.asarray(grad, dtype=np.float64)
    before = dequantize_blockwise(state["codes1"], state["absmax1"], state["map1"], blocksize)
    c = beta1 * before + (1.0 - beta1) * g
    p = np.asarray(param, dtype=np.float64) * (1.0 - lr * decay) - lr * np.sign(c)
    m = beta2 * before + (1.0 - beta2) * g
    codes1, absmax1 = quantize_blockwise(m, state["map1"], blocksize)
    return p, {"step": int(state["step"]) + 1, "codes1": codes1, "absmax1": absmax1, "map1": state["map1"],
               "exp_avg": m, "decisions": [(c, np.abs(beta1 * before) + np.abs((1.0 - beta1) * g))]}


def momentum_step(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict,
                  blocksize: int = BLOCKSIZE) -> tuple[np.ndarray, dict]:
    """(the new parameter, the new state) of one SGD-with-momentum step (torch's SGD, dampening 0, no Nesterov) from
    ``state``: ``codes1``/``absmax1``/``map1`` (the momentum buffer) and ``step``; ``hp``: ``lr``, ``momentum``,
    ``weight_decay`` (the L2 term added to the gradient). The buffer is the gradient at the first step, then
    ``momentum buf + g``; the new state holds its codes and absmax, as ``momentum_buffer`` the float64 buffer, and as
    ``update_scale`` the magnitude of the update's terms (where they cancel, rounding scales with them)."""
    lr, momentum, decay = float(hp["lr"]), float(hp.get("momentum", 0.0)), float(hp.get("weight_decay", 0.0))
    p = np.asarray(param, dtype=np.float64)
    g = np.asarray(grad, dtype=np.float64) + decay * p
    kept = 0.0 if int(state["step"]) == 0 else momentum * dequantize_blockwise(
        state["codes1"], state["absmax1"], state["map1"], blocksize)
    buf = kept + g
    codes1, absmax1 = quantize_blockwise(buf, state["map1"], blocksize)
    scale = lr * (np.abs(kept) + np.abs(grad) + np.abs(decay * p))  # the update's terms: a sum that can cancel
    return p - lr * buf, {"step": int(state["step"]) + 1, "codes1": codes1, "absmax1": absmax1, "map1": state["map1"],
                          "momentum_buffer": buf, "update_scale": scale}


def _root_step(param, grad, state: dict, hp: dict, blocksize: int, keep: float, add: float, eps: float,
               name: str) -> tuple[np.ndarray, dict]:
    """One step ``p - lr g / (sqrt(s) + eps)`` of a one-state optimizer whose state ``s = keep s + add g^2`` (``g``
    with the L2 term) is ``codes1``/``absmax1``/``map1``. The new state holds its codes and absmax, as ``name`` the
    float64 state they quantize, and as ``update_scale`` the magnitude of the update's terms (the gradient's and the
    decay's: where they cancel, rounding decides the step, as SGD's)."""
    lr, decay = float(hp["lr"]), float(hp.get("weight_decay", 0.0))
    p = np.asarray(param, dtype=np.float64)
    g = np.asarray(grad, dtype=np.float64) + decay * p
    kept = dequantize_blockwise(state["codes1"], state["absmax1"], state["map1"], blocksize)
    s = keep * kept + add * g * g
    codes1, absmax1 = quantize_blockwise(s, state["map1"], blocksize)
    denom = np.sqrt(s) + eps
    return p - lr * g / denom, {"step": int(state["step"]) + 1, "codes1": codes1, "absmax1": absmax1,
                                "map1": state["map1"], name: s,
                                "update_scale": lr * (np.abs(grad) + np.abs(decay * p)) / denom}


def rmsprop_step(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict,
                 blocksize: int = BLOCKSIZE) -> tuple[np.ndarray, dict]:
    """One RMSprop step (torch's, not centered, without momentum; ``hp``: ``lr``, ``alpha``, ``eps``,
    ``weight_decay``), the running average of squared gradients quantized (``_root_step``; as ``square_avg``)."""
    alpha = float(hp.get("alpha", 0.99))
    return _root_step(param, grad, state, hp, blocksize, alpha, 1.0 - alpha, float(hp.get("eps", 1e-8)),
                      "square_avg")


def adagrad_step(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict,
                 blocksize: int = BLOCKSIZE) -> tuple[np.ndarray, dict]:
    """One Adagrad step (torch's, without lr_decay, the accumulator from 0; ``hp``: ``lr``, ``eps``,
    ``weight_decay``), the sum of squared gradients quantized (``_root_step``; as ``sum``)."""
    return _root_step(param, grad, state, hp, blocksize, 1.0, 1.0, float(hp.get("eps", 1e-10)), "sum")


def reference_step(reference, names: tuple[str, ...], param: np.ndarray, grad: np.ndarray, state: dict, hp: dict,
                   blocksize: int = BLOCKSIZE) -> tuple[np.ndarray, dict]:
    """(the new parameter, the new state) of one step of ``reference`` (a float64 reference module: its ``update``
    with its options, LAMB's trust ratio or AdEMAMix's schedulers included) from the dequantized moments ``names``
    (moment k in ``codes<k>``/``absmax<k>``/``map<k>``) and ``step``. The new state holds the new codes and absmax
    and, by name, the float64 moments they quantize."""
    moments = {"step": np.float64(state["step"]), **{name: dequantize_blockwise(
        state[f"codes{k}"], state[f"absmax{k}"], state[f"map{k}"], blocksize) for k, name in enumerate(names, 1)}}
    p, new = reference.update(np.asarray(param, dtype=np.float64), np.asarray(grad, dtype=np.float64), moments, hp)
    out = {"step": int(state["step"]) + 1}
    for k, name in enumerate(names, start=1):
        out[f"codes{k}"], out[f"absmax{k}"] = quantize_blockwise(new[name], state[f"map{k}"], blocksize)
        out[f"map{k}"], out[name] = state[f"map{k}"], new[name]
    return p, out


@dataclass(frozen=True)
class QuantizedStep:
    """A documented optimizer's step on 8-bit block-wise state: ``step(param, grad, state, hp, blocksize)``, the
    moments it keeps quantized, in order (moment k in ``codes<k>``/``absmax<k>``/``map<k>``), each as (the reference's
    name for it, whether its map is the signed dynamic map), and the options it takes."""

    step: Callable
    moments: tuple[tuple[str, bool], ...]
    options: frozenset
    nonzero: tuple[str, ...] = ()  # options without which there is no state to quantize (SGD's momentum)

    def maps(self, scheme: str = "blockwise_8bit") -> dict:
        """``map<k>`` of each moment under ``scheme`` (``scheme_map``)."""
        return {f"map{k}": scheme_map(scheme, signed) for k, (_, signed) in enumerate(self.moments, start=1)}

    def zero_state(self, shape: tuple, blocksize: int) -> dict:
        """The state before the first step: zero moments (absmax 0: every code dequantizes to 0)."""
        blocks = -(-int(np.prod(shape)) // int(blocksize))
        return {"step": 0, **{key: value for k in range(1, len(self.moments) + 1) for key, value in (
            (f"codes{k}", np.zeros(shape, np.uint8)), (f"absmax{k}", np.zeros(blocks)))}}


def scheme_map(scheme: str, signed: bool) -> np.ndarray:
    """The sorted map a moment's codes index under ``scheme``: ``blockwise_8bit``, the signed or unsigned dynamic
    map; ``blockwise_4bit`` (Li et al. 2023), the 4-bit dynamic map for a signed moment and ``linear_map(16)``
    (no zero) for the second; ``blockwise_fp8``, the E4M3FN values over 448 (``_float8.normalized_map``: the codes
    in value order, a block's absmax 448 times its scale) for both."""
    if scheme == "blockwise_4bit":
        return dynamic_map(True, bits=4) if signed else linear_map(16)
    if scheme == "blockwise_fp8":
        return _float8.normalized_map()
    return dynamic_map(signed)


ADAM_MOMENTS = (("exp_avg", True), ("exp_avg_sq", False))  # the paper's: the unsigned map for the second moment
# bitsandbytes' AdEMAMix8bit: both EMAs of the gradient on the signed map, the second moment on the unsigned
ADEMAMIX_MOMENTS = (("exp_avg", True), ("exp_avg_slow", True), ("exp_avg_sq", False))
STEPS = {  # the references a quantized step exists for
    "adamw": QuantizedStep(partial(adamw_step, decoupled=True), ADAM_MOMENTS,
                           frozenset({"lr", "betas", "eps", "weight_decay"})),
    "adam": QuantizedStep(partial(adamw_step, decoupled=False), ADAM_MOMENTS,
                          frozenset({"lr", "betas", "eps", "weight_decay"})),
    "lion": QuantizedStep(lion_step, (("exp_avg", True),), frozenset({"lr", "betas", "weight_decay"})),
    "sgd": QuantizedStep(momentum_step, (("momentum_buffer", True),), frozenset({"lr", "momentum", "weight_decay"}),
                         nonzero=("momentum",)),
    # one moment, non-negative, on the signed map: bitsandbytes' one-state optimizers keep state1 there
    "rmsprop": QuantizedStep(rmsprop_step, (("square_avg", True),), frozenset({"lr", "alpha", "eps", "weight_decay"})),
    "adagrad": QuantizedStep(adagrad_step, (("sum", True),), frozenset({"lr", "eps", "weight_decay"})),
    "ademamix": QuantizedStep(partial(reference_step, ademamix, tuple(n for n, _ in ADEMAMIX_MOMENTS)),
                              ADEMAMIX_MOMENTS, frozenset({"lr", "betas", "alpha", "t_alpha_beta3", "eps",
                                                           "weight_decay", "weight_decouple"})),
    "lamb": QuantizedStep(partial(reference_step, lamb, tuple(n for n, _ in ADAM_MOMENTS)), ADAM_MOMENTS,
                          frozenset({"lr", "betas", "eps", "weight_decay", "weight_decouple"})),
}


def code_disagreements(value: np.ndarray, codes: np.ndarray, reference_codes: np.ndarray, code: np.ndarray,
                       absmax: np.ndarray, rounding: float, blocksize: int = BLOCKSIZE) -> tuple[int, int, float]:
    """(codes that differ from the reference's, those of them no rounding explains, the largest distance of a
    differing value from the boundaries between the two codes), for the float64 ``value`` the reference quantized
    (with ``absmax``, the reference's). A differing code is explained where that distance is within ``rounding``
    (normalized units: the implementation's arithmetic, and its quantizer's own grid where it has one)."""
    distance = disagreement_distance(value, codes, reference_codes, code, absmax, blocksize)
    differ = np.asarray(codes) != np.asarray(reference_codes)
    return (int(np.count_nonzero(differ)), int(np.count_nonzero(distance > rounding)),
            float(distance.max()) if distance.size else 0.0)
