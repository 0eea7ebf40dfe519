"""F09: Tensor lr (float32, as torch's own tests build it) makes the for-loop Adamax/Adagrad compute the
step size lr / bias_correction in float32 even for float64 parameters; foreach uses float64.
Compare against the same optimizer given lr=float(tensor_lr) (exactly the same number)."""
import torch

torch.manual_seed(0)
lr_t = torch.tensor(0.001)           # float32 0-dim, as in optim_inputs_func_adamax/adagrad
lr_f = lr_t.item()                   # the same value as a Python float


def run(cls, lr, foreach, steps=30, **kw):
    g = torch.Generator().manual_seed(1)
    p = torch.nn.Parameter(torch.randn(1000, dtype=torch.float64, generator=g))
    opt = cls([p], lr=lr, foreach=foreach, **kw)
    for _ in range(steps):
        p.grad = torch.randn(1000, dtype=torch.float64, generator=g)
        opt.step()
    return p.detach().clone()


for cls, kw in ((torch.optim.Adamax, {}), (torch.optim.Adagrad, {"lr_decay": 0.5})):
    for foreach in (False, True):
        a, b = run(cls, lr_t, foreach, **kw), run(cls, lr_f, foreach, **kw)
        err = ((a - b).abs().max() / b.abs().max() / torch.finfo(torch.float64).eps).item()
        print(f"{cls.__name__:8s} {kw} foreach={foreach}: "
              f"max|p(Tensor lr) - p(float lr)| = {err:.3g} float64 eps (normwise)")
# The step size itself after 1 step: float64 lr / (1 - 0.9) vs what the for-loop computes
clr = lr_t / (1 - 0.9 ** 1)
print("for-loop Adamax clr dtype:", clr.dtype, " clr =", clr.item(), " float64 clr =", lr_f / (1 - 0.9 ** 1),
      " rel err =", abs(clr.item() - lr_f / (1 - 0.9)) / (lr_f / (1 - 0.9)))
