"""AdamW whose bfloat16 parameters are rounded stochastically (computed in float32, then rounded to one of the two
bfloat16 neighbours with the probability that makes the rounding unbiased: torchao's
``_AdamW(bf16_stochastic_round=True)``), and mutants of the rounding that the stochastic check must catch. Judged
through the spec in ``SPECS`` (``stochastic_rounding: [bfloat16]``), at bfloat16."""

from __future__ import annotations

import math

import torch


class StochasticRoundingAdamW(torch.optim.AdamW):
    """Control: the step in float32 from float32 moments (maximize and amsgrad as torch's AdamW takes them); a
    bfloat16 parameter rounded stochastically (16 random bits against the 16 bits bfloat16 drops)."""

    random_bits = 16  # a mutant's: fewer bits, a probability rounded up to their grid

    def load_state_dict(self, state_dict):
        """torch's load casts the moments to a bfloat16 parameter's dtype: they are float32 again after it."""
        super().load_state_dict(state_dict)
        for state in self.state.values():
            for key in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
                if key in state:
                    state[key] = state[key].float()

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, decay = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state.update(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p, dtype=torch.float32),
                                 exp_avg_sq=torch.zeros_like(p, dtype=torch.float32))
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = torch.zeros_like(p, dtype=torch.float32)
                state["step"] += 1
                t, g, x = float(state["step"]), p.grad.float(), p.float()
                g = -g if group["maximize"] else g
                x.mul_(1 - lr * decay)
                state["exp_avg"].lerp_(g, 1 - beta1)
                state["exp_avg_sq"].mul_(beta2).addcmul_(g, g, value=1 - beta2)
                second = state["exp_avg_sq"]
                if group["amsgrad"]:
                    second = torch.maximum(state["max_exp_avg_sq"], second, out=state["max_exp_avg_sq"])
                denom = (second.sqrt() / math.sqrt(1 - beta2 ** t)).add_(eps)
                x.addcdiv_(state["exp_avg"], denom, value=-lr / (1 - beta1 ** t))
                p.copy_(self._rounded(x) if p.dtype == torch.bfloat16 else x)

    def _rounded(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` (float32) to bfloat16: away from zero where a random 16-bit draw is below the bits bfloat16 drops."""
        bits = x.view(torch.int32)
        dropped = bits & 0xFFFF
        shift = 16 - self.random_bits
        draw = torch.randint(0, 1 << self.random_bits, x.shape, dtype=torch.int32) << shift
        toward = bits & ~0xFFFF
        return torch.where(draw < dropped, toward + 0x10000, toward).view(torch.float32).to(torch.bfloat16)


class FourBitThresholdAdamW(StochasticRoundingAdamW):
    """Mutant: its rounding draws 4 random bits, not 16: the probability of rounding away from zero is overstated by
    up to 1/16 (biased; each rounding still one of the two neighbours)."""

    random_bits = 4


class NearestRoundingAdamW(StochasticRoundingAdamW):
    """Mutant: rounds its bfloat16 parameters to nearest while declaring a stochastic rounding (a small update that
    never reaches half a step is lost every time)."""

    def _rounded(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16)


_SPEC = {"dtypes": ["bfloat16"], "stochastic_rounding": ["bfloat16"]}
MUTANTS = {"FourBitThresholdAdamW": "adamw", "NearestRoundingAdamW": "adamw"}
CONTROLS = {"StochasticRoundingAdamW": "adamw"}
EXISTS_AT = dict.fromkeys([*MUTANTS, *CONTROLS], ("bfloat16",))
CAUGHT_BY = dict.fromkeys(MUTANTS, "stochastic")
SPECS = dict.fromkeys([*MUTANTS, *CONTROLS], _SPEC)
