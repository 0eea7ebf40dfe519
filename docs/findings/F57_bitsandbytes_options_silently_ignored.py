"""F57: bitsandbytes 0.50.2 takes documented options and ignores them (32-bit optimizers).

Each of these is in the class's signature and docstring, is accepted without a warning, and changes nothing:
``amsgrad=True`` (Adam, AdamW, LAMB: "Whether to use the AMSGrad variant"; the 32-bit state has no max of v),
SGD's ``nesterov=True`` and ``dampening`` (dampening is passed on as betas[1], which no momentum kernel reads),
RMSprop's ``momentum`` (passed on as betas[1], read by no RMSprop kernel; only centered and alpha = 0 are refused),
LAMB's ``adam_w_mode=False`` and ``bias_correction=False`` (never passed to the base class). A user who asks for
Nesterov, AMSGrad or RMSprop with momentum gets the plain algorithm. For each option: bitsandbytes with the option
against without it (identical: ignored), beside torch's optimizer with and without it (where torch has it), CPU,
float32, 5 steps. Exit 1 while any option is ignored, 0 otherwise; 2 when bitsandbytes is not installed.
"""
import sys

import torch

try:
    import bitsandbytes as bnb
except ImportError:
    print("cannot run: bitsandbytes is not installed", file=sys.stderr)
    sys.exit(2)


def run(cls, **kw):
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(64, 32) * 0.1)
    grads = [torch.randn(64, 32) * 10.0 ** (-1 - i % 3) for i in range(5)]
    opt = cls([p], **kw)
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach()


CASES = [  # (bitsandbytes class, torch class or None, common options, the option asked for, its "off" value)
    (bnb.optim.Adam, torch.optim.Adam, {"lr": 1e-2}, "amsgrad", True, False),
    (bnb.optim.AdamW, torch.optim.AdamW, {"lr": 1e-2}, "amsgrad", True, False),
    (bnb.optim.LAMB, None, {"lr": 1e-2}, "amsgrad", True, False),
    (bnb.optim.SGD, torch.optim.SGD, {"lr": 1e-2, "momentum": 0.9}, "nesterov", True, False),
    (bnb.optim.SGD, torch.optim.SGD, {"lr": 1e-2, "momentum": 0.9}, "dampening", 0.5, 0.0),
    (bnb.optim.RMSprop, torch.optim.RMSprop, {"lr": 1e-2}, "momentum", 0.5, 0.0),
    (bnb.optim.LAMB, None, {"lr": 1e-2, "weight_decay": 0.1}, "adam_w_mode", False, True),
    (bnb.optim.LAMB, None, {"lr": 1e-2}, "bias_correction", False, True),
]
ignored = []
for cls, torch_cls, common, option, on, off in CASES:
    ours = (run(cls, optim_bits=32, **common, **{option: on}) - run(cls, optim_bits=32, **common, **{option: off}))
    ours = ours.abs().max().item()
    theirs = ""
    if torch_cls is not None:
        diff = (run(torch_cls, **common, **{option: on}) - run(torch_cls, **common, **{option: off})).abs().max().item()
        theirs = f"; torch.optim.{torch_cls.__name__}: {diff:.3e}"
    print(f"bitsandbytes.optim.{cls.__name__} {option}={on} vs {option}={off}: max |diff| {ours:.3e}{theirs}"
          f"{'  <- ignored' if ours == 0.0 else ''}")
    if ours == 0.0:
        ignored.append(f"{cls.__name__}({option}={on})")
if ignored:
    print(f"F57 present: accepted and ignored: {', '.join(ignored)}", file=sys.stderr)
sys.exit(1 if ignored else 0)
