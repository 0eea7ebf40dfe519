"""4-bit and FP8 block-wise AdamW in torchao's layouts, written on optbench's own float64 quantizer (no torchao), and
mutants of them that the quantized check must catch. A parameter of at least 4096 elements in whole blocks keeps
each moment as a tensor subclass wrapping ``codes`` and ``scale``, as torchao's do (``QuantizedMoment``):
4-bit (``AdamW4bit``: blocks of 128, two codes a byte in a flat uint8 tensor, the first in the high nibble, the 4-bit
dynamic map for the first moment and ``linear_map(16)`` for the second, each carried as ``qmap``) or FP8
(``AdamWFp8``: blocks of 256, float8_e4m3fn codes of the parameter's shape, a scale of absmax / 448 per block); each
block's absmax floored at float32's 1e-12, a tie rounded up. A smaller parameter keeps float32 moments."""

from __future__ import annotations

import numpy as np
import torch

from optbench.mutants.blockwise_8bit import NumpyAdamW8bit
from optbench.reference._blockwise_8bit_step import adamw_step, scheme_map
from optbench.reference._float8 import MAX, map_codes, map_index
from optbench.reference._quantization import FLOOR_1E12, Blocks, pack_nibbles, unpack_nibbles

MOMENTS = (("exp_avg", True), ("exp_avg_sq", False))  # (state key, signed)


class QuantizedMoment(torch.Tensor):
    """A moment as torchao's ``OptimState4bit``/``OptimStateFp8`` keep it: a tensor subclass that shows the
    parameter's shape (float32) and wraps ``codes``, ``scale`` and, but for FP8, ``qmap`` (torch's protocol for
    wrapping subclasses: ``__tensor_flatten__``). Like torchao's, it implements few operations: ``detach``,
    ``clone`` and ``_to_copy`` (a device move; the dtype it shows stays: torch's ``load_state_dict`` casts every
    state tensor to the parameter's dtype), no other."""

    @staticmethod
    def __new__(cls, codes, scale, qmap, shape):
        return torch.Tensor._make_wrapper_subclass(cls, shape, dtype=torch.float32, device=codes.device)

    def __init__(self, codes, scale, qmap, shape):
        self.codes, self.scale, self.qmap, self.shown = codes, scale, qmap, tuple(shape)

    def __tensor_flatten__(self):
        return ["codes", "scale"] + ([] if self.qmap is None else ["qmap"]), [self.shown]

    @classmethod
    def __tensor_unflatten__(cls, inner, ctx, outer_size=None, outer_stride=None):
        return cls(inner["codes"], inner["scale"], inner.get("qmap"), *ctx)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func not in (aten.detach.default, aten.clone.default, aten._to_copy.default):
            raise NotImplementedError(f"{cls.__name__} does not implement {func}")
        x, device = args[0], (kwargs or {}).get("device")

        def moved(t):
            return None if t is None else t.to(device) if device is not None else t.clone()
        return cls(moved(x.codes), moved(x.scale), moved(x.qmap), x.shown)


torch.serialization.add_safe_globals([QuantizedMoment])  # a checkpoint of it loads with weights_only, as torchao's


class NumpyAdamW4bitSubclassState(NumpyAdamW8bit):
    """Control: torchao's AdamW4bit's state layout and quantizer (no torchao)."""

    scheme, blocksize = "blockwise_4bit", 128

    def _quantized(self, p) -> bool:
        return p.numel() >= self.min_8bit_size and p.numel() % self.blocksize == 0

    # the layout: how indices of the scheme's map and block absmax are stored, and read back
    def _stored(self, indices: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(pack_nibbles(indices))

    def _indices(self, codes: torch.Tensor, shape) -> np.ndarray:
        return unpack_nibbles(codes.to(torch.uint8).numpy()).reshape(shape)

    def _scale(self, absmax: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(absmax, np.float64)).float()

    def _absmax(self, scale: torch.Tensor) -> np.ndarray:
        return scale.double().numpy()

    def _keep(self, state: dict, key: str, indices: np.ndarray, absmax: np.ndarray, signed: bool) -> None:
        """The moment as torchao keeps it: a ``QuantizedMoment`` of ``codes`` and ``scale`` (and, 4-bit, ``qmap``)."""
        qmap = None if self.scheme == "blockwise_fp8" else torch.tensor(scheme_map(self.scheme, signed),
                                                                        dtype=torch.float32)
        state[key] = QuantizedMoment(self._stored(indices), self._scale(absmax), qmap, tuple(indices.shape))

    def _step8(self, p, hp: dict):
        blocks = Blocks(self.blocksize, "up", FLOOR_1E12)
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            for key, signed in MOMENTS:
                self._keep(state, key, np.zeros(p.shape, np.uint8), np.zeros(p.numel() // self.blocksize), signed)
        before = {"step": int(state["step"])}
        for k, (key, signed) in enumerate(MOMENTS, start=1):
            before[f"map{k}"] = scheme_map(self.scheme, signed)
            before[f"codes{k}"] = self._indices(state[key].codes, p.shape)
            before[f"absmax{k}"] = self._absmax(state[key].scale)
        new_p, new = adamw_step(p.double().numpy(), p.grad.double().numpy(), before, hp, blocks)
        p.copy_(torch.from_numpy(new_p))
        state["step"] += 1
        for k, (key, signed) in enumerate(MOMENTS, start=1):
            self._keep(state, key, self._rounded(new[f"codes{k}"], new[key], new[f"absmax{k}"], before[f"map{k}"]),
                       new[f"absmax{k}"], signed)

    def _rounded(self, indices: np.ndarray, value: np.ndarray, absmax: np.ndarray, qmap: np.ndarray) -> np.ndarray:
        """The codes it stores for ``value`` (the reference's nearest ``indices``; a mutant's own rounding)."""
        return np.asarray(indices, np.uint8)


class SwappedNibblesAdamW4bit(NumpyAdamW4bitSubclassState):
    """Mutant: its two codes a byte packed the other way round (the first in the low nibble): consistent with
    itself, every code read as torchao's layout says belongs to its neighbour."""

    def _stored(self, indices: np.ndarray) -> torch.Tensor:
        flat = np.asarray(indices, np.uint8).ravel()
        return torch.from_numpy((flat[1::2] << 4) | flat[0::2])

    def _indices(self, codes: torch.Tensor, shape) -> np.ndarray:
        packed = codes.to(torch.uint8).numpy()
        return np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(shape)


class NumpyAdamWFp8SubclassState(NumpyAdamW4bitSubclassState):
    """Control: torchao's AdamWFp8's state layout and quantizer (no torchao)."""

    scheme, blocksize = "blockwise_fp8", 256

    def _stored(self, indices: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(map_codes(indices)).view(torch.float8_e4m3fn)

    def _indices(self, codes: torch.Tensor, shape) -> np.ndarray:
        return map_index(codes.to(torch.float8_e4m3fn).view(torch.uint8).numpy()).reshape(shape)

    def _scale(self, absmax: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.asarray(absmax, np.float64) / MAX).float()

    def _absmax(self, scale: torch.Tensor) -> np.ndarray:
        return scale.double().numpy() * MAX


class TruncatingAdamWFp8(NumpyAdamWFp8SubclassState):
    """Mutant: its FP8 codes rounded toward zero (the code below a value's magnitude), not to the nearest."""

    def _rounded(self, indices: np.ndarray, value: np.ndarray, absmax: np.ndarray, qmap: np.ndarray) -> np.ndarray:
        idx = np.asarray(indices, np.int64).ravel()
        normalized = np.asarray(value, np.float64).ravel() / np.repeat(absmax, self.blocksize)[:idx.size]
        past = np.abs(qmap[idx]) > np.abs(normalized)  # the nearest code lies beyond the value: one toward zero
        idx = np.where(past, idx - np.sign(qmap[idx]).astype(np.int64), idx)
        return idx.astype(np.uint8).reshape(np.shape(indices))


_SUBCLASS = {"min_size": 4096, "ties": "up", "floor": 1e-12, "whole_blocks": True}
_4BIT_SPEC = {"dtypes": ["float32"], "quantized": {**_SUBCLASS, "scheme": "blockwise_4bit", "blocksize": 128,
                                                   "moments": {k: [f"{k}.codes", f"{k}.scale", f"{k}.qmap"]
                                                               for k, _ in MOMENTS}}}
_FP8_SPEC = {"dtypes": ["float32"], "quantized": {**_SUBCLASS, "scheme": "blockwise_fp8", "blocksize": 256,
                                                  "moments": {k: [f"{k}.codes", f"{k}.scale"] for k, _ in MOMENTS}}}
MUTANTS = {"SwappedNibblesAdamW4bit": "adamw", "TruncatingAdamWFp8": "adamw"}
CONTROLS = {"NumpyAdamW4bitSubclassState": "adamw", "NumpyAdamWFp8SubclassState": "adamw"}
EXISTS_AT = dict.fromkeys([*MUTANTS, *CONTROLS], ("float32",))
CAUGHT_BY = dict.fromkeys(MUTANTS, "quantized")
SPECS = {**dict.fromkeys(["NumpyAdamW4bitSubclassState", "SwappedNibblesAdamW4bit"], _4BIT_SPEC),
         **dict.fromkeys(["NumpyAdamWFp8SubclassState", "TruncatingAdamWFp8"], _FP8_SPEC)}
