"""F58: bitsandbytes 0.50.2's optimizer base class breaks two of torch.optim.Optimizer's contracts.

Both in ``bitsandbytes/optim/optimizer.py`` (``Optimizer8bit`` and its ``Optimizer1State``/``Optimizer2State``), so
every bitsandbytes optimizer, 32-bit and 8-bit, on every backend:

1. ``update_step`` begins with ``p.data = p.data.contiguous(); p.grad = p.grad.contiguous()`` (added for the CUDA
   kernels, bitsandbytes-foundation/bitsandbytes#1185 and bitsandbytes-foundation/bitsandbytes#1187). For a
   non-contiguous parameter (a transposed weight, a strided view into a larger buffer, ZeRO-style chunks) that swaps
   in new tensors: after ``step()`` the caller's gradient tensor is no longer ``p.grad`` (a reference the caller
   kept, a gradient bucket view, is silently detached) and the parameter no longer shares storage with what it
   viewed, so the buffer it was a view of stops being updated. torch.optim updates in place and never reassigns
   either.
2. ``load_state_dict`` is overridden without calling torch's, so hooks registered with
   ``register_load_state_dict_pre_hook``/``_post_hook`` never run (loading by parameter name, e.g.
   ``optbench.name_aware``, and any checkpoint-remapping hook, are silently skipped; the state is re-paired by
   position).

Shown with Adam on CPU, float32, beside torch.optim.Adam. Exit 1 while either shows, 0 otherwise; 2 when
bitsandbytes is not installed.
"""
import sys

import torch

try:
    import bitsandbytes as bnb
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)


def replaces(cls, **kw) -> bool:
    buffer = torch.ones(8, 6)
    p = torch.nn.Parameter(buffer[:, ::2])  # a strided view: shares the buffer's storage, not contiguous
    grad = torch.full((3, 8), 0.5).t()  # a non-contiguous gradient, as a transposed matmul makes
    p.grad = grad
    cls([p], lr=0.1, **kw).step()
    kept_grad = p.grad is grad
    moved = bool((p.detach() != 1).all())
    buffer_follows = torch.equal(buffer[:, ::2], p.detach())
    print(f"{cls.__module__}.{cls.__name__}: non-contiguous parameter updated {moved}; p.grad still the caller's "
          f"tensor {kept_grad}; the buffer it views sees the update {buffer_follows}")
    return moved and not (kept_grad and buffer_follows)


def skips_hooks(cls, **kw) -> bool:
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    opt = cls([p], lr=0.1, **kw)
    opt.step()
    called = []
    opt.register_load_state_dict_pre_hook(lambda o, sd: called.append("pre"))
    opt.register_load_state_dict_post_hook(lambda o: called.append("post"))
    opt.load_state_dict(opt.state_dict())
    print(f"{cls.__module__}.{cls.__name__}: load_state_dict ran hooks {called}")
    return called != ["pre", "post"]


replaces(torch.optim.Adam)
skips_hooks(torch.optim.Adam)
found = [what for what, shows in (("replaced a non-contiguous parameter's data/gradient", replaces(bnb.optim.Adam)),
                                  ("skipped load_state_dict hooks", skips_hooks(bnb.optim.Adam))) if shows]
if found:
    print(f"F58 present: bitsandbytes' optimizer {' and '.join(found)}", file=sys.stderr)
sys.exit(1 if found else 0)
