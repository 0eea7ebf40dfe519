"""F62: DeepSpeed 0.19.8's CPU optimizers lose their float32 state on load_state_dict (16-bit parameters).

``fp32_optimizer_states=True`` (the default of ``DeepSpeedCPUAdam``, ``DeepSpeedCPUAdagrad`` and
``DeepSpeedCPULion``) "creates momentum and variance in full precision regardless of the precision of the
parameters". The classes inherit torch.optim.Optimizer's ``load_state_dict``, which casts every floating state tensor
to its parameter's dtype (``_process_value_according_to_param_policy``, pytorch/pytorch#43706): after a resume the
state of a bfloat16 parameter is bfloat16, the kernel (which has bfloat16-state variants) goes on in it, and the run
no longer matches the uninterrupted one. Shown with bfloat16 parameters: the state's dtype before and after a
state_dict round trip, and the parameters 20 steps later. Exit 1 while the state comes back in another dtype, 0
otherwise; 2 when deepspeed is not installed.
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


def run(cls, resume: bool):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(256, dtype=torch.bfloat16))
    grads = [torch.randn(256, dtype=torch.bfloat16) * 1e-2 for _ in range(40)]
    opt = cls([p], lr=1e-3)
    for t, g in enumerate(grads):
        if resume and t == 20:
            saved = opt.state_dict()
            opt = cls([p], lr=1e-3)
            opt.load_state_dict(saved)
        p.grad = g.clone()
        opt.step()
    dtypes = {k: v.dtype for k, v in opt.state[p].items() if torch.is_tensor(v)}
    return p.detach().float(), dtypes


cast = []
for cls in (DeepSpeedCPUAdam, DeepSpeedCPUAdagrad, DeepSpeedCPULion):
    (straight, before), (resumed, after) = run(cls, False), run(cls, True)
    print(f"{cls.__name__}: state {before} uninterrupted, {after} after load_state_dict; parameters 20 steps later "
          f"differ in {(straight != resumed).sum().item()} of 256 elements")
    if before != after:
        cast.append(cls.__name__)
if cast:
    print(f"F62 present: {', '.join(cast)} keep float32 state but get it back as bfloat16 from load_state_dict",
          file=sys.stderr)
sys.exit(1 if cast else 0)
