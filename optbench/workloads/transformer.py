"""A seeded parameter set shaped like a small decoder, with the edge cases from torch's history.

Gradient scales vary per tensor and per step over ``10**grad_log10_range`` so that epsilon bugs show.
Built in: a zero-size parameter last (#100701), a parameter whose grad is None on some steps, a
frozen parameter, non-contiguous parameters and a scalar parameter. With ``sparse`` every gradient is
COO over rows, as ``nn.Embedding(sparse=True)`` makes.
"""

from __future__ import annotations

import numpy as np

from optbench.workloads.model import ParamSpec, SparseGrad, Workload

# Which steps a "sometimes None" parameter gets no gradient on (a branch not taken).
SOMETIMES_NONE_PERIOD = 3


def transformer_specs(width: int, layers: int, vocab: int, sparse: bool) -> tuple[ParamSpec, ...]:
    """Embedding, per-layer attention/MLP/norms, plus the edge-case parameters."""
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


def initial_values(rng: np.random.Generator, specs) -> dict[str, np.ndarray]:
    return {s.name: np.asarray(rng.standard_normal(s.shape) * s.init_std + (1.0 if "norm" in s.name else 0.0))
            for s in specs}


def scaled_normal(rng: np.random.Generator, shape, grad_log10_range) -> np.ndarray:
    lo, hi = grad_log10_range
    return np.asarray(rng.standard_normal(shape) * 10.0 ** rng.uniform(lo, hi))


def sparse_rows(rng: np.random.Generator, g: np.ndarray, rows_per_step: int) -> SparseGrad:
    """An embedding-like gradient: a few distinct rows of ``g`` (a scalar: one sparse_dim-0 entry)."""
    if g.ndim == 0:
        return SparseGrad(np.zeros((0, 1), dtype=np.int64), g.reshape(1))
    rows = np.unique(rng.integers(0, g.shape[0], size=min(rows_per_step, g.shape[0])))
    return SparseGrad(rows.reshape(1, -1).astype(np.int64), g[rows])


def generate(
    *,
    seed: int,
    steps: int,
    width: int = 32,
    layers: int = 2,
    vocab: int = 64,
    sparse: bool = False,
    grad_log10_range: tuple[float, float] = (-8.0, 2.0),
    rows_per_step: int = 12,
    name: str | None = None,
) -> Workload:
    """Generate the workload deterministically from ``seed`` (same seed, same bits)."""
    rng = np.random.default_rng(seed)
    specs = transformer_specs(width, layers, vocab, sparse)
    init = initial_values(rng, specs)
    grads = []
    for t in range(steps):
        step_grads = {}
        for s in specs:
            g = scaled_normal(rng, s.shape, grad_log10_range)
            if s.kind == "frozen" or (s.kind == "sometimes_none" and t % SOMETIMES_NONE_PERIOD == 1):
                step_grads[s.name] = None
            else:
                step_grads[s.name] = sparse_rows(rng, g, rows_per_step) if sparse else g
        grads.append(step_grads)
    notes = ("zero-size parameter last (#100701)", "grad None every 3rd step", "frozen parameter",
             "non-contiguous parameters", "0-dim parameter")
    return Workload(name or ("sparse_embedding" if sparse else "transformer"), specs, init, tuple(grads), notes=notes)
