"""F64: DeepSpeed 0.19.8's CPU Adagrad writes its update into the caller's gradient (the tail elements).

``DeepSpeedCPUAdagrad.step()`` passes ``p.grad.data`` to the C++ op. Its vectorised kernel (``Step_AVX`` in
``csrc/includes/cpu_adagrad.h``) covers the elements up to a multiple of the SIMD width times 8, 4 and 1; the rest go
through the scalar loop of ``Adagrad_Optimizer::Step_1`` (``csrc/adagrad/cpu_adagrad.cpp``), which ends with
``grads[k] = grad * step_size;  // STORE UPDATE TERM TO GRAD'S MEMORY``. For a contiguous gradient that is
``p.grad`` itself: after ``step()`` its last ``numel % SIMD width`` elements (16 with AVX-512, 8 with AVX2; every
element where no SIMD path is built) hold -lr g / (sqrt(sum) + eps), not the gradient. torch.optim never writes
``p.grad``; code that reads it after the step (gradient accumulation across steps, logging, clipping statistics)
gets wrong numbers for those elements. Exit 1 while any gradient element changes, 0 otherwise; 2 when deepspeed is
not installed.
"""
import sys

import torch

try:
    from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad
except ImportError:
    print("cannot run: deepspeed is not installed", file=sys.stderr)
    sys.exit(2)

found = False
for n in (64, 70, 200):
    for cls in (torch.optim.Adagrad, DeepSpeedCPUAdagrad):
        p = torch.nn.Parameter(torch.ones(n))
        grad = torch.full((n,), 0.5)
        p.grad = grad
        cls([p], lr=0.1).step()
        changed = (grad != 0.5).nonzero().flatten().tolist()
        print(f"{cls.__name__}, {n} elements: gradient elements changed by step(): {len(changed)}"
              + (f" (indices {changed[0]}..{changed[-1]}, now {grad[changed[0]].item():.4g})" if changed else ""))
        found = found or bool(changed)
if found:
    print("F64 present: DeepSpeedCPUAdagrad wrote its update into p.grad", file=sys.stderr)
sys.exit(1 if found else 0)
