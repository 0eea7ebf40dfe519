"""F63: DeepSpeed 0.19.8's CPUAdam computes its bias corrections from a cache outside its state_dict.

The C++ ``Adam_Optimizer`` (``csrc/includes/cpu_adam.h`` ``IncrementStep``) keeps one ``_step``, ``_betta1_t`` and
``_betta2_t`` for the whole optimizer: when a parameter's step is the cached step + 1 it multiplies the cached
beta^t by beta in float32, otherwise it recomputes ``pow(beta, step)``. Which branch runs depends on what the previous
parameter's step was, so the bias corrections (and so the update) depend on the order of the parameters and on
whether the optimizer was rebuilt from a checkpoint, none of which its state_dict records. The difference is float32
rounding (the repeated product drifts from the power), so a resumed run is not the uninterrupted one bit for bit:
shown with 400 steps, resumed at step 100 from the state_dict, against torch.optim.Adam doing the same (bit for bit).
Exit 1 while the resumed DeepSpeed run differs, 0 otherwise; 2 when deepspeed is not installed.
"""
import sys

import torch

try:
    from deepspeed.ops.adam import DeepSpeedCPUAdam
except ImportError:
    print("cannot run: deepspeed is not installed", file=sys.stderr)
    sys.exit(2)

torch.manual_seed(0)
init = torch.randn(256, 64)
grads = [torch.randn(256, 64) * 1e-2 for _ in range(400)]


def train(cls, resume_at=None):
    p = torch.nn.Parameter(init.clone())
    opt = cls([p], lr=1e-3)
    for t, g in enumerate(grads):
        if t == resume_at:
            saved = opt.state_dict()
            opt = cls([p], lr=1e-3)
            opt.load_state_dict(saved)
        p.grad = g.clone()
        opt.step()
    return p.detach()


found = False
for cls in (torch.optim.Adam, DeepSpeedCPUAdam):
    straight, resumed = train(cls), train(cls, resume_at=100)
    differ = (straight != resumed).sum().item()
    print(f"{cls.__name__}: resumed at step 100, after step 400 {differ} of {straight.numel()} elements differ from "
          f"the uninterrupted run (max |diff| {(straight - resumed).abs().max().item():.3g})")
    found = found or (differ > 0 and cls is DeepSpeedCPUAdam)
if found:
    print("F63 present: DeepSpeedCPUAdam's resumed run is not the uninterrupted one (bias corrections from a cache "
          "outside its state_dict)", file=sys.stderr)
sys.exit(1 if found else 0)
