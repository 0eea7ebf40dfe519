"""8-bit block-wise AdamW, Lion and LAMB written on optbench's own float64 quantizer (no bitsandbytes), and mutants
of them that the quantized check must catch: a parameter of at least ``min_8bit_size`` elements keeps its moments
as uint8 codes with a float32 absmax per block of 256 (``state1``, ``absmax1``, ``qmap1``; ``state2``...), the layout of
bitsandbytes' 8-bit optimizers, a smaller one float32 moments (``exp_avg``, ``exp_avg_sq``). Each is judged through the
candidate spec in ``SPECS`` (the quantized state's layout), at float32: its step is float64 NumPy written back."""

from __future__ import annotations

import math

import numpy as np
import torch

from optbench.reference import lamb
from optbench.reference._blockwise_8bit_step import STEPS, adamw_step, lion_step
from optbench.reference._quantization import FLOOR_1E12, Blocks, dequantize_blockwise, dynamic_map


class _Keeps8bitCodes(torch.optim.Optimizer):
    """torch's ``load_state_dict`` casts every state tensor but ``step`` to a floating parameter's dtype: the uint8
    codes are cast back after it (bitsandbytes keeps them out of that cast by nesting its quantized state)."""

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        for state in self.state.values():
            for key in ("state1", "state2"):
                if key in state and state[key].dtype != torch.uint8:
                    state[key] = state[key].to(torch.uint8)

    def _step_two_moments(self, p, step, hp: dict) -> None:
        """``step`` (a quantized step of ``reference/_blockwise_8bit_step.py`` on Adam's two moments: the first on
        the signed map, the second on the unsigned) from ``p``'s codes, written back."""
        state = self.state[p]
        if not state:
            blocks = -(-p.numel() // 256)
            state.update(step=0, **{f"{key}{k}": value for k, signed in ((1, True), (2, False)) for key, value in (
                ("state", torch.zeros(p.shape, dtype=torch.uint8)), ("absmax", torch.zeros(blocks)),
                ("qmap", torch.tensor(dynamic_map(signed), dtype=torch.float32)))})
        before = {"step": state["step"], "map1": dynamic_map(True), "map2": dynamic_map(False)}
        for k in (1, 2):
            before[f"codes{k}"], before[f"absmax{k}"] = state[f"state{k}"].numpy(), state[f"absmax{k}"].double().numpy()
        new_p, new = step(p.double().numpy(), p.grad.double().numpy(), before, hp)
        p.copy_(torch.from_numpy(new_p))
        state["step"] = new["step"]
        for k in (1, 2):
            state[f"state{k}"] = torch.from_numpy(np.asarray(new[f"codes{k}"], dtype=np.uint8).reshape(p.shape))
            state[f"absmax{k}"] = torch.from_numpy(np.asarray(new[f"absmax{k}"])).float()


class NumpyAdamW8bit(_Keeps8bitCodes):
    """Control: bitsandbytes' AdamW8bit's algorithm and state layout, its 8-bit step optbench's own reference's."""

    wrong_beta2: float | None = None  # a mutant's beta2 for its 8-bit step

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, min_8bit_size=4096):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})
        self.min_8bit_size = min_8bit_size

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not self._quantized(p):
                    self._step32(p, lr, beta1, beta2, eps, decay)
                else:
                    self._step8(p, {"lr": lr, "betas": (beta1, self.wrong_beta2 or beta2), "eps": eps,
                                    "weight_decay": decay})

    def _quantized(self, p) -> bool:
        """Whether ``p`` steps 8-bit: as its state is (a loaded state stepped as what it is, as bitsandbytes'
        classes step it), else by its size."""
        state = self.state.get(p) or {}
        return "state1" in state if state else p.numel() >= self.min_8bit_size

    def _step32(self, p, lr, beta1, beta2, eps, decay):
        state = self.state[p]
        if not state:
            state.update(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
        state["step"] += 1
        step = float(state["step"])
        p.mul_(1 - lr * decay)
        state["exp_avg"].lerp_(p.grad, 1 - beta1)
        state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
        denom = (state["exp_avg_sq"].sqrt() / math.sqrt(1 - beta2 ** step)).add_(eps)
        p.addcdiv_(state["exp_avg"], denom, value=-lr / (1 - beta1 ** step))

    def _step8(self, p, hp: dict):
        self._step_two_moments(p, adamw_step, hp)


class WrongBeta2AdamW8bit(NumpyAdamW8bit):
    """Mutant: its 8-bit step's second moment decays with beta2 = 0.99 whatever the group says."""

    wrong_beta2 = 0.99


class StuckStepAdamW8bit(NumpyAdamW8bit):
    """Mutant: its 8-bit step counter never advances (every step bias-corrected as the first), and says so."""

    def _step8(self, p, hp: dict):
        super()._step8(p, hp)
        self.state[p]["step"] = 0


class MemoryOrderAdamW8bit(NumpyAdamW8bit):
    """Mutant (bitsandbytes on CUDA, F77): a parameter's codes are held with the strides it had at its first step
    (``zeros_like``) but stepped in memory order, against the parameter's own order: its steps stay consistent, the
    codes read as the tensors they are belong to other elements wherever the parameter is not contiguous."""

    def _step8(self, p, hp: dict):
        state = self.state[p]
        held = {k: state[f"state{k}"] for k in (1, 2)} if state else {
            k: torch.zeros_like(p, dtype=torch.uint8) for k in (1, 2)}
        in_memory = {k: torch.as_strided(t, p.shape, torch.empty(p.shape).stride()) for k, t in held.items()}
        if state:
            for k in (1, 2):
                state[f"state{k}"] = in_memory[k].clone()  # what the kernel reads: the memory, in p's order
        super()._step8(p, hp)
        for k in (1, 2):
            in_memory[k].copy_(state[f"state{k}"])  # written back as the kernel writes: the memory, in p's order
            state[f"state{k}"] = held[k]


class NumpyAdamW8bitSubclassState(NumpyAdamW8bit):
    """Control: torchao's AdamW8bit's state layout and quantizer (no torchao): a parameter of at least 4096 elements
    in whole blocks of 256 keeps each moment as a tensor (its dequantized value) carrying ``codes``, ``scale`` (each
    block's absmax, floored at float32's 1e-12) and ``qmap``; a value halfway between two entries rounds up."""

    first_moment_signed = True  # a mutant's: the unsigned map for the signed first moment

    def load_state_dict(self, state_dict):
        """A tensor's attributes do not survive a state_dict (torch's load casts each tensor anew, as a checkpoint
        file would): the codes and scale are kept beside each moment (``exp_avg_codes``, ``exp_avg_scale``), cast
        back to uint8 and put on the moment again, as torchao's subclass carries its own through."""
        super().load_state_dict(state_dict)
        for state in self.state.values():
            for key, signed in (("exp_avg", self.first_moment_signed), ("exp_avg_sq", False)):
                if f"{key}_codes" in state:
                    self._keep(state, key, state[f"{key}_codes"].to(torch.uint8).numpy(),
                               state[f"{key}_scale"].double().numpy(), signed)

    @staticmethod
    def _keep(state: dict, key: str, codes: np.ndarray, scale: np.ndarray, signed: bool) -> None:
        state[key] = _carrier(codes, scale, signed)
        state[f"{key}_codes"], state[f"{key}_scale"] = state[key].codes, state[key].scale

    def _quantized(self, p) -> bool:
        return p.numel() >= self.min_8bit_size and p.numel() % 256 == 0

    def _step8(self, p, hp: dict):
        blocks, signed = Blocks(256, "up", FLOOR_1E12), (self.first_moment_signed, False)
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            for k, key in ((1, "exp_avg"), (2, "exp_avg_sq")):
                self._keep(state, key, np.zeros(p.shape, np.uint8), np.zeros(p.numel() // 256), signed[k - 1])
        before = {"step": int(state["step"]), "map1": dynamic_map(signed[0]), "map2": dynamic_map(signed[1])}
        for k, key in ((1, "exp_avg"), (2, "exp_avg_sq")):
            before[f"codes{k}"], before[f"absmax{k}"] = state[key].codes.numpy(), state[key].scale.double().numpy()
        new_p, new = adamw_step(p.double().numpy(), p.grad.double().numpy(), before, hp, blocks)
        p.copy_(torch.from_numpy(new_p))
        state["step"] += 1
        for k, key in ((1, "exp_avg"), (2, "exp_avg_sq")):
            self._keep(state, key, np.asarray(new[f"codes{k}"], np.uint8), new[f"absmax{k}"], signed[k - 1])


def _carrier(codes: np.ndarray, scale: np.ndarray, signed: bool) -> torch.Tensor:
    """A moment as torchao keeps it: a tensor of its dequantized value with ``codes``, ``scale`` and ``qmap``."""
    qmap = dynamic_map(signed)
    value = torch.from_numpy(dequantize_blockwise(codes, scale, qmap, 256)).float()
    value.codes, value.scale = torch.from_numpy(codes.copy()), torch.from_numpy(np.asarray(scale, np.float64)).float()
    value.qmap = torch.tensor(qmap, dtype=torch.float32)
    return value


class WrongMapAdamW8bitSubclassState(NumpyAdamW8bitSubclassState):
    """Mutant: its first moment on the unsigned map (negative values clamp to its smallest entry)."""

    first_moment_signed = False


class NumpyLion8bit(_Keeps8bitCodes):
    """Control: bitsandbytes' Lion8bit's algorithm and state layout, its 8-bit step optbench's own reference's."""

    wrong_beta1: float | None = None  # a mutant's beta1 (the interpolation the sign is taken of) for its 8-bit step

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0, min_8bit_size=4096):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})
        self.min_8bit_size = min_8bit_size

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, (beta1, beta2), decay = group["lr"], group["betas"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if p.numel() < self.min_8bit_size:
                    if not state:
                        state["exp_avg"] = torch.zeros_like(p)
                    c = state["exp_avg"].mul(beta1).add_(p.grad, alpha=1 - beta1)
                    p.mul_(1 - lr * decay).add_(c.sign_(), alpha=-lr)
                    state["exp_avg"].lerp_(p.grad, 1 - beta2)
                    continue
                if not state:
                    state.update(step=0, state1=torch.zeros(p.shape, dtype=torch.uint8),
                                 absmax1=torch.zeros(-(-p.numel() // 256)),
                                 qmap1=torch.tensor(dynamic_map(True), dtype=torch.float32))
                before = {"step": state["step"], "map1": dynamic_map(True), "codes1": state["state1"].numpy(),
                          "absmax1": state["absmax1"].double().numpy()}
                hp = {"lr": lr, "betas": (self.wrong_beta1 or beta1, beta2), "weight_decay": decay}
                new_p, new = lion_step(p.double().numpy(), p.grad.double().numpy(), before, hp)
                p.copy_(torch.from_numpy(new_p))
                state["step"] = new["step"]
                state["state1"] = torch.from_numpy(np.asarray(new["codes1"], dtype=np.uint8).reshape(p.shape))
                state["absmax1"] = torch.from_numpy(np.asarray(new["absmax1"])).float()


class WrongBeta1Lion8bit(NumpyLion8bit):
    """Mutant: its 8-bit step takes the sign of the interpolation with beta1 = 0.99 whatever the group says."""

    wrong_beta1 = 0.99


class NumpyLamb8bit(_Keeps8bitCodes):
    """Control: an 8-bit LAMB in bitsandbytes' layout (Adam's two moments), each tensor's step scaled by its trust
    ratio (``reference/lamb.py``, also for the float32 state of a small parameter)."""

    trust_ratio = True  # False: the mutant, Adam's direction unscaled (bitsandbytes' LAMB8bit, F72)

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, weight_decouple=False,
                 min_8bit_size=4096):
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                                  "weight_decouple": weight_decouple})
        self.min_8bit_size = min_8bit_size

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            hp = {k: group[k] for k in ("lr", "betas", "eps", "weight_decay", "weight_decouple")}
            hp["adam"] = not self.trust_ratio
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if p.numel() < self.min_8bit_size:
                    if not state:
                        state.update(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p),
                                     exp_avg_sq=torch.zeros_like(p))
                    new_p, new = lamb.update(p.double().numpy(), p.grad.double().numpy(),
                                             {k: (v.double().numpy() if k != "step" else float(v))
                                              for k, v in state.items()}, hp)
                    state.update(step=torch.tensor(new["step"]), **{k: torch.as_tensor(np.asarray(new[k])).to(p.dtype)
                                                                    for k in ("exp_avg", "exp_avg_sq")})
                    p.copy_(torch.as_tensor(np.asarray(new_p)))  # a 0-d parameter's step is a NumPy scalar
                    continue
                self._step_two_moments(p, STEPS["lamb"].step, hp)


class NoTrustRatioLamb8bit(NumpyLamb8bit):
    """Mutant: Adam's direction unscaled, no trust ratio (as bitsandbytes' LAMB8bit steps its 8-bit parameters)."""

    trust_ratio = False


_QUANTIZED = {"scheme": "blockwise_8bit", "blocksize": 256, "min_size": 4096}
_ADAMW_SPEC = {"dtypes": ["float32"], "quantized": {**_QUANTIZED, "moments": {
    "exp_avg": ["state1", "absmax1", "qmap1"], "exp_avg_sq": ["state2", "absmax2", "qmap2"]}}}
_SUBCLASS_STATE_SPEC = {"dtypes": ["float32"], "quantized": {
    **_QUANTIZED, "ties": "up", "floor": 1e-12, "whole_blocks": True, "moments": {
        "exp_avg": ["exp_avg.codes", "exp_avg.scale", "exp_avg.qmap"],
        "exp_avg_sq": ["exp_avg_sq.codes", "exp_avg_sq.scale", "exp_avg_sq.qmap"]}}}
_LION_SPEC = {"dtypes": ["float32"],
              "quantized": {**_QUANTIZED, "moments": {"exp_avg": ["state1", "absmax1", "qmap1"]}}}
MUTANTS = {"WrongBeta2AdamW8bit": "adamw", "StuckStepAdamW8bit": "adamw", "MemoryOrderAdamW8bit": "adamw",
           "WrongBeta1Lion8bit": "lion",
           "NoTrustRatioLamb8bit": "lamb", "WrongMapAdamW8bitSubclassState": "adamw"}
CONTROLS = {"NumpyAdamW8bit": "adamw", "NumpyLion8bit": "lion", "NumpyLamb8bit": "lamb",
            "NumpyAdamW8bitSubclassState": "adamw"}
EXISTS_AT = dict.fromkeys([*MUTANTS, *CONTROLS], ("float32",))
CAUGHT_BY = dict.fromkeys(MUTANTS, "quantized")
# the candidate spec each is judged through (a spec file's keys but class): its quantized state's layout
SPECS = {"NumpyAdamW8bit": {**_ADAMW_SPEC, "quantized": {**_ADAMW_SPEC["quantized"], "full_precision": (
    "optbench.mutants.full_precision.NumpyAdamW32bit")}},
         **dict.fromkeys(["WrongBeta2AdamW8bit", "StuckStepAdamW8bit", "MemoryOrderAdamW8bit",
                          "NumpyLamb8bit", "NoTrustRatioLamb8bit"], _ADAMW_SPEC),
         **dict.fromkeys(["NumpyLion8bit", "WrongBeta1Lion8bit"], _LION_SPEC),
         **dict.fromkeys(["NumpyAdamW8bitSubclassState", "WrongMapAdamW8bitSubclassState"], _SUBCLASS_STATE_SPEC)}
