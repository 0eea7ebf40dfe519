"""F51: pytorch-optimizer 4.1.0's AdEMAMix accepts t_alpha_beta3=0, then raises ZeroDivisionError at the first step.

``t_alpha_beta3`` is the number of steps over which alpha and beta3 are warmed up; the constructor validates it as
non-negative (``validate_non_negative``), so 0 (a warmup of no steps) is accepted, but ``schedule_alpha`` computes
``step * alpha / t_alpha_beta3`` and the first ``step()`` divides by zero. The paper's schedulers tend to plain alpha
and beta3 as the warmup goes to 0, and the authors' code (``if step < warmup``) runs a warmup of 0 as none. Exit 1
while the step raises (or the constructor accepts 0 and the step does not behave as no warmup), 0 otherwise; 2 when
pytorch-optimizer is not installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import AdEMAMix
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)


def stepped(t_alpha_beta3):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(4, dtype=torch.float64))
    p.grad = torch.randn(4, dtype=torch.float64)
    AdEMAMix([p], lr=1e-2, t_alpha_beta3=t_alpha_beta3).step()
    return p.detach()


try:
    zero = stepped(0)
except ValueError as exc:  # refused at construction: fixed by validation
    print(f"t_alpha_beta3=0 refused at construction: {exc}")
    sys.exit(0)
except ZeroDivisionError as exc:
    print(f"t_alpha_beta3=0 accepted by the constructor; step() raised ZeroDivisionError: {exc}")
    print("F51 present: AdEMAMix(t_alpha_beta3=0) passes validation and its first step divides by zero",
          file=sys.stderr)
    sys.exit(1)
none = stepped(None)
same = torch.allclose(zero, none, rtol=0, atol=1e-15)
print(f"t_alpha_beta3=0 stepped: {zero.tolist()}; without warmup: {none.tolist()}: {'same' if same else 'DIFFERENT'}")
if not same:
    print("F51 present in another form: t_alpha_beta3=0 steps otherwise than no warmup", file=sys.stderr)
sys.exit(0 if same else 1)
