"""Does a generic batched-by-shape wrapper pay for torch's elementwise optimizers? On this CPU,
no: stacking parameters and gradients per (shape) bucket, stepping the stacks and copying the rows back costs more
than torch's fused per-tensor step saves (docs/performance.md).
Run: pytest -m benchmark tests/benchmarks/test_batched_wrapper.py -p no:xdist -s"""

import pytest
import torch
from torch.utils.benchmark import Timer

pytestmark = pytest.mark.benchmark


def _model():
    torch.manual_seed(0)
    shapes = []
    for _ in range(24):  # a 24-layer, width-256 decoder: 240 tensors, 18.9M parameters
        shapes += [(256, 256)] * 4 + [(1024, 256), (256, 1024), (256,), (1024,), (256,), (256,)]
    params = [torch.nn.Parameter(torch.randn(s) * 0.02) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    return params


@pytest.mark.parametrize("name, cls, kw", [("Adam fused", torch.optim.Adam, {"fused": True}),
                                           ("AdamW fused", torch.optim.AdamW, {"fused": True}),
                                           ("SGD fused momentum", torch.optim.SGD, {"fused": True, "momentum": 0.9})])
def test_a_stacking_wrapper_does_not_beat_the_fused_per_tensor_step(name, cls, kw):
    params = _model()
    buckets: dict[tuple, list] = {}
    for p in params:
        buckets.setdefault(tuple(p.shape), []).append(p)
    stacks = [torch.nn.Parameter(torch.stack([p.detach() for p in b])) for b in buckets.values()]
    for s, b in zip(stacks, buckets.values()):
        s.grad = torch.stack([p.grad for p in b])
    per, stacked = cls(params, lr=1e-3, **kw), cls(stacks, lr=1e-3, **kw)
    per.step()
    stacked.step()

    def wrapped():
        for s, b in zip(stacks, buckets.values()):
            torch.stack([p.detach() for p in b], out=s.data)
            torch.stack([p.grad for p in b], out=s.grad)
        stacked.step()
        for s, b in zip(stacks, buckets.values()):
            torch._foreach_copy_([p.data for p in b], list(s.data.unbind(0)))

    threads = torch.get_num_threads()
    time = {label: Timer(stmt, globals=g, num_threads=threads).blocked_autorange(min_run_time=1.5).median
            for label, stmt, g in [("per-tensor", "per.step()", {"per": per}), ("wrapped", "f()", {"f": wrapped}),
                                   ("stacks alone", "s.step()", {"s": stacked})]}
    print(f"\n{name}: " + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in time.items())
          + f"; wrapper speedup {time['per-tensor'] / time['wrapped']:.2f}x, ceiling (no copies) "
          f"{time['per-tensor'] / time['stacks alone']:.2f}x")
    assert time["wrapped"] > time["per-tensor"], "the wrapper pays here: build it (docs/performance.md)"
