"""Bug-zoo workloads: the inputs optimizers have broken on before, gathered into one parameter set.

Dense (``zoo``): many zero-size tensors interleaved with real ones (#94865, #140066), a layer frozen
for some steps and then unfrozen, a step on which no parameter has a gradient, a parameter whose
state is created late, an all-zero gradient, a 3-D and a 0-dim parameter, non-contiguous strides.
Sparse (``zoo_sparse``): COO gradients with duplicate indices (uncoalesced), explicitly stored zeros,
and no entries at all, beside zero-size and frozen-then-unfrozen embeddings.
"""

from __future__ import annotations

import numpy as np

from optbench.workloads.model import ParamSpec, SparseGrad, Workload
from optbench.workloads.transformer import initial_values, scaled_normal

FROZEN_STEPS = range(4, 10)  # the "frozen" layer gets no gradient on these steps, then trains again
NO_GRAD_STEP = 2  # no parameter has a gradient on this step
LATE_FROM = 7  # the "late" parameter gets its first gradient on this step
EMPTY_SHAPES = ((0,), (0, 8), (8, 0), (0, 0), (0, 8), (8, 0))


def zoo_specs(sparse: bool) -> tuple[ParamSpec, ...]:
    real = ([ParamSpec("emb.dup.weight", (32, 8), init_std=1.0), ParamSpec("emb.zeros.weight", (32, 8), init_std=1.0),
             ParamSpec("emb.empty.weight", (32, 8), init_std=1.0), ParamSpec("emb.mixed.weight", (24, 8), init_std=1.0)]
            if sparse else
            [ParamSpec("blocks.0.weight", (16, 8), init_std=0.25), ParamSpec("blocks.0.bias", (8,)),
             ParamSpec("blocks.1.weight", (8, 16), "noncontiguous", 0.25),
             ParamSpec("blocks.1.scale", (), init_std=1.0),
             ParamSpec("blocks.2.kernel", (4, 3, 5), init_std=0.3),
             ParamSpec("blocks.3.zero_grad.weight", (8, 8), init_std=0.3)])
    specs = []
    for i, spec in enumerate(real):  # a zero-size tensor before every real one (#94865, #140066)
        shape = EMPTY_SHAPES[i % len(EMPTY_SHAPES)]
        specs += [ParamSpec(f"empty.{i}.weight", (0, 8) if sparse else shape), spec]
    specs += [ParamSpec("frozen.layer.weight", (12, 8), init_std=0.25),
              ParamSpec("frozen.layer.bias", (12,) if not sparse else (12, 8)),
              ParamSpec("late.weight", (8, 4), init_std=0.25),
              ParamSpec("empty.last.weight", (0, 8) if sparse else (0,))]
    return tuple(specs)


def _sparse(rng, spec: ParamSpec, g: np.ndarray, step: int) -> SparseGrad | None:
    rows = spec.shape[0]
    if spec.numel == 0:
        return SparseGrad(np.zeros((1, 0), dtype=np.int64), np.zeros((0,) + spec.shape[1:]), coalesced=False)
    if "dup" in spec.name or "mixed" in spec.name:  # duplicate row indices: their values must sum
        picked = rng.integers(0, rows, size=10)
        picked[:3] = picked[3]  # at least one row appears four times
    else:
        picked = np.unique(rng.integers(0, rows, size=8))
    values = g[picked].copy()
    if "zeros" in spec.name or "mixed" in spec.name:  # explicitly stored zeros are entries too
        values[: max(1, len(picked) // 3)] = 0.0
    if "empty" in spec.name and step % 2 == 0:  # a gradient with no entries at all
        picked, values = picked[:0], values[:0]
    return SparseGrad(picked.reshape(1, -1).astype(np.int64), values, coalesced=False)


def generate(*, seed: int, steps: int, sparse: bool = False, grad_log10_range=(-8.0, 2.0),
             name: str | None = None) -> Workload:
    """Generate the zoo deterministically from ``seed``."""
    rng = np.random.default_rng(seed)
    specs = zoo_specs(sparse)
    init = initial_values(rng, specs)
    grads = []
    for t in range(steps):
        step_grads = {}
        for s in specs:
            g = scaled_normal(rng, s.shape, grad_log10_range)
            if "zero_grad" in s.name and t % 2 == 0:
                g = np.zeros(s.shape)
            none = (t == NO_GRAD_STEP or (s.name.startswith("frozen.") and t in FROZEN_STEPS)
                    or (s.name.startswith("late.") and t < LATE_FROM))
            step_grads[s.name] = None if none else (_sparse(rng, s, g, t) if sparse else g)
        grads.append(step_grads)
    notes = ("zero-size tensors interleaved with real ones (#94865, #140066)",
             f"frozen.* get no gradient on steps {FROZEN_STEPS.start + 1}-{FROZEN_STEPS.stop}",
             f"no gradients at all on step {NO_GRAD_STEP + 1}",
             f"late.weight first gets a gradient on step {LATE_FROM + 1}")
    notes += (("uncoalesced COO gradients with duplicate rows", "explicitly stored zeros", "gradients with no entries")
              if sparse else ("an all-zero gradient every other step", "3-D and 0-dim parameters"))
    return Workload(name or ("zoo_sparse" if sparse else "zoo"), specs, init, tuple(grads), notes=notes)
