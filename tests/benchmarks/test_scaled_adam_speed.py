"""BatchedScaledAdam against the per-tensor ScaledAdam (optbench.kernels.scaled_adam), step time on a
transformer-shaped model: run on a quiet machine with
``pytest -m benchmark tests/benchmarks/test_scaled_adam_speed.py -p no:xdist -s``. Prints what it measured."""

from __future__ import annotations

import pytest
import torch
import torch.utils.benchmark as benchmark

from optbench.kernels.scaled_adam import BatchedScaledAdam, ScaledAdam

pytestmark = pytest.mark.benchmark


def transformer(layers: int = 24, width: int = 256) -> dict[str, torch.nn.Parameter]:
    """Per layer: q/k/v/o (width, width) with biases, an MLP up (4 width, width) and down, two norms."""
    shapes = {}
    for i in range(layers):
        for n in "qkvo":
            shapes[f"layers.{i}.attn.{n}.weight"], shapes[f"layers.{i}.attn.{n}.bias"] = (width, width), (width,)
        shapes[f"layers.{i}.mlp.up.weight"], shapes[f"layers.{i}.mlp.up.bias"] = (4 * width, width), (4 * width,)
        shapes[f"layers.{i}.mlp.down.weight"], shapes[f"layers.{i}.mlp.down.bias"] = (width, 4 * width), (width,)
        shapes[f"layers.{i}.norm1.weight"], shapes[f"layers.{i}.norm2.weight"] = (width,), (width,)
    g = torch.Generator().manual_seed(0)
    return {n: torch.nn.Parameter(torch.randn(s, generator=g) * 0.05) for n, s in shapes.items()}


@pytest.mark.parametrize("clipping_scale", [None, 2.0])
def test_batched_scaled_adam_is_faster_than_per_tensor(clipping_scale):
    """24 layers of width 256 (336 tensors, 18.9M parameters), float32, every parameter with a gradient;
    with clipping (icefall's clipping_scale=2.0) each step also takes the group's gradient norm."""
    times = {}
    for cls in (ScaledAdam, BatchedScaledAdam):
        params = transformer()
        for p in params.values():
            p.grad = torch.randn_like(p) * 1e-2
        opt = cls(list(params.items()), clipping_scale=clipping_scale, clipping_update_period=10)
        for _ in range(11):  # past the first clipping period: the clipping factor is applied
            opt.step()
        timer = benchmark.Timer("opt.step()", globals={"opt": opt}, num_threads=torch.get_num_threads())
        times[cls.__name__] = timer.blocked_autorange(min_run_time=1).median
    per_tensor, batched = times["ScaledAdam"], times["BatchedScaledAdam"]
    print(f"ScaledAdam step, {len(params)} tensors, {sum(p.numel() for p in params.values()):,} float32 parameters, "
          f"clipping_scale={clipping_scale}, {torch.get_num_threads()} threads: per tensor {per_tensor * 1e3:.1f} ms, "
          f"batched {batched * 1e3:.1f} ms, speedup {per_tensor / batched:.2f}x")
    assert batched < per_tensor
