"""Timing workloads: model-shaped, contiguous parameter sets of a chosen size, and the edge cases apart.

The parity workload is small and full of edge cases (a quarter of its weights column-major, a zero-size
parameter, grads that are sometimes None), which is right for correctness and wrong for timing: a speed
row must measure what a model has. ``model`` builds a decoder-shaped set (embedding, per layer q/k/v/o,
MLP up/down with a bias, two norms; a final norm) whose width and depth are picked so the total is close
to the asked parameter count. Each edge case is the same model with one thing changed, timed as its
own workload, so its cost is a ratio of its own (``speed.overhead``):

* ``noncontiguous``: every 2-D weight column-major (same values, transposed strides);
* ``tiny_tensors``: 1024 extra 32-element vectors (launch/loop overhead per tensor);
* ``zero_size``: 64 zero-size parameters interleaved with the real ones (#94865, #100701);
* ``none_grads``: every other tensor of the layers has no gradient this step (a branch not taken).

``tensors(params, count)`` splits a fixed total into ``count`` equal matrices, for the tensor-count
sweep. Values are drawn with a seeded ``torch.Generator`` straight into torch (no float64 NumPy copy:
the sweep reaches 1e8 parameters); same seed, same values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

WIDTHS = (32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 8192)
EDGE_CASES = ("noncontiguous", "tiny_tensors", "zero_size", "none_grads")
GRAD_STD = 1e-3


@dataclass(frozen=True)
class SpeedSpec:
    name: str
    shape: tuple[int, ...]
    layout: str = "contiguous"  # or column_major (2-D only)
    has_grad: bool = True

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def kind(self) -> str:
        """The parity workload's word for it (what a suite's deviation matches)."""
        return "noncontiguous" if self.layout == "column_major" else "dense" if self.has_grad else "sometimes_none"


@dataclass(frozen=True)
class SpeedWorkload:
    """A named list of parameter shapes to time a step on, with seeded values."""

    name: str
    specs: tuple[SpeedSpec, ...]
    seed: int = 0
    objective = None  # the timing path treats it like a gradient-stream Workload

    @property
    def numel(self) -> int:
        """Parameters stepped (those with a gradient)."""
        return sum(s.numel for s in self.specs if s.has_grad)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def restricted(self, keep) -> SpeedWorkload:
        return replace(self, specs=tuple(s for s in self.specs if keep(s)))

    def materialize(self, dtype: torch.dtype, device: torch.device) -> dict[str, torch.nn.Parameter]:
        """Parameters (std 0.02, norms around 1) with their gradients already set (std 1e-3)."""
        gen = torch.Generator().manual_seed(self.seed)
        params = {}
        for spec in self.specs:
            value = torch.randn(spec.shape, generator=gen) * (0.02 if "norm" not in spec.name else 0.1)
            value = (value + 1.0 if "norm" in spec.name else value).to(device=device, dtype=dtype)
            grad = (torch.randn(spec.shape, generator=gen) * GRAD_STD).to(device=device, dtype=dtype)
            if spec.layout == "column_major":
                value, grad = value.t().contiguous().t(), grad.t().contiguous().t()
            p = torch.nn.Parameter(value)
            p.grad = grad if spec.has_grad else None
            params[spec.name] = p
        return params


def model_shape(params: float) -> tuple[int, int]:
    """(width, layers) of the decoder for about ``params`` parameters (a vocabulary of 8 x width): the
    widest with at least four layers within 15 % of the size, else the closest."""
    options = []
    for d in WIDTHS:
        per_layer, fixed = 12 * d * d + 7 * d, 8 * d * d + d
        layers = max(1, round((params - fixed) / per_layer))
        options.append((d, layers, abs(fixed + layers * per_layer - params) / params))
    good = [o for o in options if o[1] >= 4 and o[2] <= 0.15]
    d, layers, _ = good[-1] if good else min(options, key=lambda o: o[2])
    return d, layers


def model_specs(params: float) -> list[SpeedSpec]:
    d, layers = model_shape(params)
    specs = [SpeedSpec("embed.weight", (8 * d, d))]
    for i in range(layers):
        p = f"layers.{i}"
        specs += [SpeedSpec(f"{p}.attn.{proj}.weight", (d, d)) for proj in ("q_proj", "k_proj", "v_proj", "o_proj")]
        specs += [SpeedSpec(f"{p}.mlp.up_proj.weight", (4 * d, d)), SpeedSpec(f"{p}.mlp.up_proj.bias", (4 * d,)),
                  SpeedSpec(f"{p}.mlp.down_proj.weight", (d, 4 * d)), SpeedSpec(f"{p}.norm1.weight", (d,)),
                  SpeedSpec(f"{p}.norm2.weight", (d,))]
    specs.append(SpeedSpec("final_norm.weight", (d,)))
    return specs


def model(params: float, seed: int = 0, edge: str | None = None) -> SpeedWorkload:
    """The model-shaped workload of about ``params`` parameters, or one edge case of it."""
    specs = model_specs(params)
    if edge is None:
        return SpeedWorkload("model", tuple(specs), seed)
    if edge == "noncontiguous":
        specs = [replace(s, layout="column_major") if len(s.shape) == 2 else s for s in specs]
    elif edge == "tiny_tensors":
        specs += [SpeedSpec(f"tiny.{i}.weight", (32,)) for i in range(1024)]
    elif edge == "zero_size":
        step = max(1, len(specs) // 64)
        out = []
        for i, s in enumerate(specs):
            out.append(s)
            if i % step == 0 and sum(x.numel == 0 for x in out) < 64:
                out.append(SpeedSpec(f"empty.{i}.weight", (0,)))
        specs = out
    elif edge == "none_grads":
        specs = [replace(s, has_grad=False) if s.name.startswith("layers.") and i % 2 else s
                 for i, s in enumerate(specs)]
    else:
        raise ValueError(f"unknown edge case {edge!r}: {', '.join(EDGE_CASES)}")
    return SpeedWorkload(edge, tuple(specs), seed)


def tensors(params: float, count: int, seed: int = 0) -> SpeedWorkload:
    """``count`` equal matrices (64 columns where they fit) holding about ``params`` in all."""
    each = max(1, round(params / count))
    shape = (each // 64, 64) if each >= 64 and each % 64 == 0 else (each,)
    return SpeedWorkload(f"tensors-{count}", tuple(SpeedSpec(f"blocks.{i}.weight", shape) for i in range(count)), seed)


def sized(params: float, seed: int = 0) -> SpeedWorkload:
    """The model workload named by its size, for the size sweep (``params-1e+06``)."""
    return replace(model(params, seed), name=f"params-{params:.0e}")


def by_name(name: str, params: float, seed: int = 0) -> SpeedWorkload:
    """``model``, an edge case, ``params-<n>`` (the size sweep) or ``tensors-<count>`` (at ``params``)."""
    if name == "model" or name in EDGE_CASES:
        return model(params, seed, None if name == "model" else name)
    kind, _, value = name.partition("-")
    if kind == "params":
        return sized(float(value), seed)
    if kind == "tensors":
        return tensors(params, int(value), seed)
    raise ValueError(f"unknown speed workload {name!r}")
