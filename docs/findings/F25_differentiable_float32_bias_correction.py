"""F25: with differentiable=True, Adam and AdamW compute their bias corrections in float32 for float64 parameters.

The differentiable (and capturable) path evaluates ``1 - beta ** step`` with the per-parameter ``step`` state,
a float32 tensor (``_get_scalar_dtype()``), instead of the Python float the default path uses. At step 1,
``1 - 0.999`` in float32 is 9.99987e-4, 1.3e-5 away from 1e-3, so float64 parameters take updates (and
derivatives) about 6.6e-6 relative off the documented ones: ~3e10 float64 eps.
"""

import torch

torch.manual_seed(0)
p0 = torch.randn(1000, dtype=torch.float64)
g = torch.randn(1000, dtype=torch.float64)
for name in ("Adam", "AdamW"):
    updates = {}
    for differentiable in (False, True):
        p = p0.clone().requires_grad_() if differentiable else torch.nn.Parameter(p0.clone())
        q = p.clone() if differentiable else p  # a differentiable step runs on a non-leaf
        opt = getattr(torch.optim, name)([q], differentiable=differentiable, foreach=False)
        q.grad = g.clone()
        opt.step()
        updates[differentiable] = (q.detach() - p0)
    decay = 0.01 if name == "AdamW" else 0.0  # AdamW's default decoupled weight decay
    exact = -1e-3 * decay * p0 - 1e-3 * g / (g.abs() + 1e-8)  # documented step 1: m_hat = g, sqrt(v_hat) = |g|
    for differentiable, update in updates.items():
        rel = float((update - exact).abs().max() / exact.abs().max())
        print(f"{name} differentiable={differentiable}: update off the documented step by {rel:.3g} relative")
print("(1e-13 is the rounding of p_1 = p_0 + update itself, at |p_0| ~ 3 and |update| ~ 1e-3)")
