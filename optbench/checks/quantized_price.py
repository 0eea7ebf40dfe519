"""The price of quantization: beside the quantized check's per-step judging, on the same gradients, the
full-precision reference run free from the same start and the documented quantized scheme run on its own codes;
after the last step, how far the candidate and that scheme lie from the full-precision run (``quantized.price``) and
from each other (``quantized.spread``), in units of the full-precision run's updates; and the candidate's price after
each step (``quantized.price_step``, report.md's plot of the price per step)."""

from __future__ import annotations

import numpy as np

from optbench.adapters.quantized import blocks
from optbench.metrics import QUANTIZED_PRICE, QUANTIZED_SPREAD
from optbench.reference._blockwise_8bit_step import QuantizedStep
from optbench.reference.contract import eager_state


class FreeRuns:
    """The two free-running float64 runs the price of quantization is measured against, stepped beside the judging
    on the same gradients: the full-precision reference's and the quantized scheme's on its own codes."""

    def __init__(self, reference, quantized: QuantizedStep, eps: float, start: dict, hp: dict, q: dict):
        """``reference``: the suite's float64 reference module; ``quantized``: its quantized step; ``eps``: the
        parameters' dtype's; ``start``: the parameters; ``hp``: the reference's options per parameter; ``q``: the
        spec's ``quantized`` block."""
        self.ref, self.hp, self.q, self.quantized = reference, hp, q, quantized
        self.maps = quantized.maps(q["scheme"])
        self.full_hp = {n: {**hp[n], "dtype_eps": eps} for n in start}
        self.start, self.full, self.quant = dict(start), dict(start), dict(start)
        self.full_state = {n: self.ref.init(start[n], self.full_hp[n]) for n in start} if eager_state(self.ref) else {}
        self.quant_state = {n: quantized.zero_state(start[n].shape, blocks(q)) for n in start}
        self.paid: list[float] = []  # the candidate's price after each step

    def stepped(self, params: dict) -> None:
        """The candidate's parameters after a step every parameter of which ``step`` took: its price then."""
        self.paid.append(self._rel(params, self.full)[0])

    def _rel(self, a: dict, b: dict) -> tuple[float, str]:
        """The largest over the parameters of ``a``'s distance from ``b``, relative to how far the full-precision
        run moved them."""
        return max((float(np.linalg.norm(a[n] - b[n]) / max(np.linalg.norm(self.full[n] - self.start[n]), 1e-300)),
                    n) for n in self.start)

    def per_step(self) -> list[tuple[int, float]]:
        """(step, the candidate's price after it), for ``quantized.price_step``."""
        return list(enumerate(self.paid, start=1))

    def step(self, n: str, g: np.ndarray) -> None:
        if n not in self.full_state:
            self.full_state[n] = self.ref.init(self.full[n], self.full_hp[n])
        self.full[n], self.full_state[n] = self.ref.update(self.full[n], g, self.full_state[n], self.full_hp[n])
        self.quant[n], new = self.quantized.step(self.quant[n], g, {**self.quant_state[n], **self.maps}, self.hp[n],
                                                 blocks(self.q))
        self.quant_state[n] = {k: v for k, v in new.items() if k.startswith(("codes", "absmax", "step"))}

    def price(self, final: dict, steps: int) -> list[tuple[str, float, str]]:
        """After the last step, each as the largest over the parameters of its distance from the full-precision
        run relative to how far that run moved them: the candidate's (the price of quantization it pays) and the
        quantized run's (the price the scheme itself sets); and the candidate's distance from the quantized run (a
        spread, not a verdict: one code decided within rounding sends the two runs apart)."""
        paid, quantized, spread = (self._rel(final, self.full), self._rel(self.quant, self.full),
                                   self._rel(final, self.quant))
        return [(QUANTIZED_PRICE, paid[0], f"after {steps} steps the parameters lie {paid[0]:.3g} of the full-"
                                           f"precision reference's updates from it ({paid[1]}); the quantized scheme "
                                           f"run on its own codes: {quantized[0]:.3g} ({quantized[1]})"),
                (QUANTIZED_SPREAD, spread[0], f"{spread[0]:.3g} of the updates from the quantized reference run on "
                                              f"its own codes ({spread[1]}): how far two runs on 8-bit state drift "
                                              "apart")]

