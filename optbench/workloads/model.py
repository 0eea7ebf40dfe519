"""Seeded, named parameter sets shaped like a transformer block, and their gradient stream.

A workload is generated once in float64 NumPy from a seed. Every implementation and the reference
then consume the same values rounded to the dtype under test (``materialize``/``gradients``), so the
only difference between them is the optimizer. Gradient scales vary per tensor and per step over
``10**grad_log10_range`` so that epsilon bugs show; edge cases from PyTorch's history are built in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

# Which steps a "sometimes None" parameter gets no gradient on (a branch not taken).
SOMETIMES_NONE_PERIOD = 3


@dataclass(frozen=True)
class ParamSpec:
    """One named parameter. ``kind`` is dense, frozen, noncontiguous or sometimes_none."""

    name: str
    shape: tuple[int, ...]
    kind: str = "dense"
    init_std: float = 0.02

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass(frozen=True)
class Workload:
    """Named initial values and a per-step gradient stream, all float64 (None: no grad that step)."""

    name: str
    specs: tuple[ParamSpec, ...]
    init: dict[str, np.ndarray]
    grads: tuple[dict[str, np.ndarray | None], ...]
    sparse_rows: tuple[dict[str, np.ndarray], ...] | None = None  # per step: name -> touched rows

    @property
    def steps(self) -> int:
        return len(self.grads)

    @property
    def numel(self) -> int:
        return sum(s.numel for s in self.specs)

    def restricted(self, keep) -> Workload:
        """The same workload (same values, same bits) with only the parameters ``keep(name)`` accepts."""
        return replace(self, specs=tuple(s for s in self.specs if keep(s.name)))

    def materialize(self, dtype: torch.dtype, device: torch.device) -> dict[str, torch.nn.Parameter]:
        """Fresh torch parameters, in spec order, rounded to ``dtype``."""
        params = {}
        for spec in self.specs:
            value = torch.from_numpy(self.init[spec.name]).to(device=device, dtype=dtype, copy=True)
            if spec.kind == "noncontiguous":
                value = value.t().contiguous().t()  # same values, column-major strides
            params[spec.name] = torch.nn.Parameter(value, requires_grad=spec.kind != "frozen")
        return params

    def gradient(self, step: int, name: str, like: torch.Tensor) -> torch.Tensor | None:
        """The gradient for ``name`` at ``step`` (0-based) like ``like``: same dtype, device and strides,
        or sparse COO over the leading dimension for a sparse workload."""
        g = self.grads[step][name]
        if g is None:
            return None
        dense = torch.from_numpy(g).to(device=like.device, dtype=like.dtype, copy=True)
        if self.sparse_rows is not None:
            if like.dim() == 0:
                return torch.sparse_coo_tensor(torch.zeros(0, 1, dtype=torch.long), dense.reshape(1), ()).coalesce()
            rows = torch.from_numpy(self.sparse_rows[step][name]).to(like.device)
            return torch.sparse_coo_tensor(rows.reshape(1, -1), dense[rows], like.shape).coalesce()
        return torch.empty_strided(like.shape, like.stride(), dtype=like.dtype, device=like.device).copy_(dense)

    def reference_gradient(self, grad: torch.Tensor | None):
        """What the reference sees for ``grad``: float64 NumPy, or ``(indices, values)`` if sparse."""
        if grad is None:
            return None
        if grad.is_sparse:
            return grad.indices().cpu().numpy(), grad.values().double().cpu().numpy()
        return grad.double().cpu().numpy()


def transformer_specs(width: int, layers: int, vocab: int, sparse: bool) -> tuple[ParamSpec, ...]:
    """A small decoder: embedding, per-layer attention/MLP/norms, plus the edge-case parameters."""
    d, h = width, 4 * width
    specs = [ParamSpec("embed.weight", (vocab, d), init_std=1.0)]
    for i in range(layers):
        p = f"layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            specs.append(ParamSpec(f"{p}.attn.{proj}.weight", (d, d), init_std=d**-0.5))
        if not sparse:
            specs += [
                ParamSpec(f"{p}.attn.q_proj.bias", (d,)),
                ParamSpec(f"{p}.mlp.up_proj.weight", (h, d), init_std=d**-0.5),
                ParamSpec(f"{p}.mlp.up_proj.bias", (h,)),
                ParamSpec(f"{p}.mlp.down_proj.weight", (d, h), "noncontiguous", h**-0.5),
                ParamSpec(f"{p}.norm1.weight", (d,), init_std=0.1),
                ParamSpec(f"{p}.norm2.weight", (d,), init_std=0.1),
            ]
    specs += [
        ParamSpec("layers.0.attn.rotary.inv_freq", (d // 2,), "frozen", 1.0),
        ParamSpec("layers.0.attn.logit_scale", (), init_std=1.0),  # scalar
        ParamSpec("adapter.lora_a.weight", (8, d), "sometimes_none"),
        ParamSpec("adapter.lora_b.weight", (d, 8), "noncontiguous"),
        ParamSpec("head.pad.weight", (0, d) if sparse else (0,)),  # zero-size, last (#100701)
    ]
    return tuple(specs)


def generate(
    *,
    name: str = "transformer",
    seed: int,
    steps: int,
    width: int = 32,
    layers: int = 2,
    vocab: int = 64,
    sparse: bool = False,
    grad_log10_range: tuple[float, float] = (-8.0, 2.0),
    rows_per_step: int = 12,
) -> Workload:
    """Generate the workload deterministically from ``seed`` (same seed, same bits)."""
    rng = np.random.default_rng(seed)
    specs = transformer_specs(width, layers, vocab, sparse)
    init = {s.name: np.asarray(rng.standard_normal(s.shape) * s.init_std + (1.0 if "norm" in s.name else 0.0)) for s in specs}
    lo, hi = grad_log10_range
    grads, sparse_rows = [], []
    for t in range(steps):
        step_grads: dict[str, np.ndarray | None] = {}
        step_rows: dict[str, np.ndarray] = {}
        for s in specs:
            g = np.asarray(rng.standard_normal(s.shape) * 10.0 ** rng.uniform(lo, hi))
            if s.kind == "frozen" or (s.kind == "sometimes_none" and t % SOMETIMES_NONE_PERIOD == 1):
                g = None
            elif sparse and s.shape:  # an embedding-like gradient: a few distinct rows
                rows = np.unique(rng.integers(0, s.shape[0], size=min(rows_per_step, s.shape[0])))
                untouched = np.ones(s.shape[0], dtype=bool)
                untouched[rows] = False
                g[untouched] = 0.0
                step_rows[s.name] = rows
            step_grads[s.name] = g
        grads.append(step_grads)
        sparse_rows.append(step_rows)
    return Workload(name, specs, init, tuple(grads), tuple(sparse_rows) if sparse else None)
