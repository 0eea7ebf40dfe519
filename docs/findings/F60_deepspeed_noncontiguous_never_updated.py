"""F60: DeepSpeed 0.19.8's CPU optimizers never update a non-contiguous parameter, and say nothing.

``DeepSpeedCPUAdam``, ``DeepSpeedCPUAdagrad`` and ``DeepSpeedCPULion`` hand ``p.data``, ``p.grad`` and the state to
their C++ ops, whose step functions (``ds_adam_step`` in ``csrc/adam/cpu_adam_impl.cpp``, ``ds_adagrad_step``,
``ds_lion_step``) begin with ``params.contiguous()``, ``grads.contiguous()`` and ``exp_avg.contiguous()``: for a
non-contiguous tensor (a transposed weight, a strided view) that is a fresh copy, which the kernel updates and
nothing copies back. The state, created by ``torch.zeros_like(p.data)`` with the parameter's strides, is
non-contiguous too, so the parameter and its state stay as they were while ``state['step']`` counts on. A
non-contiguous gradient alone is fine (only read). Shown on CPU, float32, one step with lr 0.1 beside torch.optim.
Exit 1 while any class leaves the parameter unchanged, 0 otherwise; 2 when deepspeed is not installed.
"""
import sys

import torch

try:
    from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad
    from deepspeed.ops.adam import DeepSpeedCPUAdam
    from deepspeed.ops.lion import DeepSpeedCPULion
except ImportError:
    print("cannot run: deepspeed is not installed", file=sys.stderr)
    sys.exit(2)


def moved(cls) -> bool:
    p = torch.nn.Parameter(torch.ones(6, 8).t())  # a transposed weight: non-contiguous, as nn.Linear(...).weight.t()
    p.grad = torch.full_like(p, 0.5)
    opt = cls([p], lr=0.1)
    opt.step()
    changed = bool((p.detach() != 1).all())
    print(f"{cls.__name__}: non-contiguous (8, 6) parameter updated: {changed}; state step "
          f"{opt.state[p].get('step')!r}")
    return changed


moved(torch.optim.Adam)
stuck = [cls.__name__ for cls in (DeepSpeedCPUAdam, DeepSpeedCPUAdagrad, DeepSpeedCPULion) if not moved(cls)]
if stuck:
    print(f"F60 present: {', '.join(stuck)} left a non-contiguous parameter (and its state) unchanged", file=sys.stderr)
sys.exit(1 if stuck else 0)
