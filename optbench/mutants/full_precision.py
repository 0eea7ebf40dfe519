"""The full-precision class of the catalogue's 8-bit AdamW (``blockwise_8bit.NumpyAdamW8bit``), as bitsandbytes'
32-bit classes are of its 8-bit ones: the round-trip loads each one's state into the other
(``quantized.full_precision``), where a library's class must continue as the saved state's class would, or
refuse. Not catalogue entries of their own (no ``MUTANTS``/``CONTROLS``): the tests name them as a spec's
full-precision class."""

from __future__ import annotations

import torch

from optbench.mutants.blockwise_8bit import NumpyAdamW8bit


class NumpyAdamW32bit(NumpyAdamW8bit):
    """Control: new state in float32 whatever the size; a loaded 8-bit state stepped as 8-bit (bitsandbytes' rule:
    the state's kind decides its step)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, min_8bit_size=2 ** 62):
        super().__init__(params, lr, betas, eps, weight_decay, min_8bit_size)


class CodesAsMomentsAdamW32bit(NumpyAdamW32bit):
    """Wrong: loading 8-bit state, it takes the uint8 codes for the moments themselves (cast to float, scales
    dropped) and steps on: no error, a silently wrong run."""

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        for state in self.state.values():
            if "state1" in state:
                state.update(step=torch.tensor(float(state["step"])), exp_avg=state.pop("state1").float(),
                             exp_avg_sq=state.pop("state2").float())
                for key in ("absmax1", "absmax2", "qmap1", "qmap2"):
                    state.pop(key, None)


class RefusingAdamW32bit(NumpyAdamW32bit):
    """Control: refuses, in one line, a state it does not keep (8-bit codes) at load."""

    def load_state_dict(self, state_dict):
        if any("state1" in state for state in state_dict["state"].values()):
            raise ValueError("8-bit state: load it into the 8-bit class")
        super().load_state_dict(state_dict)
