"""F75: torchao 0.18's AdamW8bit (and AdamW4bit and AdamWFp8, whose state is written back the same way) raises at
the first step of a non-contiguous parameter (a transposed weight) when beta1 <= 0.5.

Its step computes the new first moment as ``exp_avg.float().lerp(grad, 1 - beta1)`` and writes it back into the 8-bit
state with ``copy_``, which quantizes through ``input.view(-1, block_size)``. A lerp whose weight is 0.5 or more takes
its result's layout from the gradient: for a transposed parameter (and gradient) the new moment is non-contiguous and
the view fails inside torch.compile (``BackendCompilerFailed: ... Cannot view a tensor with shape ... and strides
...``). With beta1 above 0.5 the result follows the moment's own (contiguous) layout and the step runs. Nothing in
torchao documents a limit on beta1 or on the parameters' layout; torch.optim.AdamW steps the same parameter. This
script steps a (32, 128) view of a (128, 32) tensor with betas (0.5, 0.999) and with the default (0.9, 0.999).
Exit 1 while betas (0.5, 0.999) raise, 0 otherwise; 2 without torchao.
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
try:
    from torchao.optim import AdamW4bit, AdamW8bit, AdamWFp8
except ImportError:
    print("cannot run: torchao is not installed", file=sys.stderr)
    sys.exit(2)


def steps(cls, betas) -> str:
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(128, 32).t())  # non-contiguous, 4096 elements: quantized state
    optimizer = cls([p], lr=1e-3, betas=betas)
    try:
        for _ in range(2):
            p.grad = torch.randn(128, 32).t()
            optimizer.step()
    except Exception as exc:
        lines = [line for line in str(exc).splitlines() if line.strip()]
        return f"raises {type(exc).__name__}: {' '.join(lines[:2])[:200]}"
    return "steps"


broken = False
for cls in (torch.optim.AdamW, AdamW8bit, AdamW4bit, AdamWFp8):
    for betas in ((0.9, 0.999), (0.5, 0.999)):
        what = steps(cls, betas)
        print(f"{cls.__module__}.{cls.__name__}, betas {betas}, a transposed parameter: {what}")
        broken |= cls is not torch.optim.AdamW and what != "steps"
if broken:
    print("F75 present: torchao's low-bit AdamW cannot step a non-contiguous parameter with beta1 <= 0.5")
    sys.exit(1)
print("F75 absent")
