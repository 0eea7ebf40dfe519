"""F26: torch.optim.Adagrad steps a complex parameter with sparse gradients in complex arithmetic.

torch documents complex parameters as stepped like their torch.view_as_real equivalent (two independent
real parts). Adagrad's dense path does that; its sparse path squares the complex gradient values
(grad_values.pow(2)), takes a complex sqrt and divides in complex arithmetic. Its first step is then
lr * g / sqrt(g * g) = +-lr, a real number: the imaginary parts do not move at all, where the documented
step moves each part by lr * sign. The accumulator is not (Re g)**2 + 1j (Im g)**2 either.
"""
import warnings

import torch

warnings.filterwarnings("ignore", message="Sparse invariant checks")

z = torch.tensor([1.0 + 2.0j, -3.0 + 0.5j], dtype=torch.complex128)
g = torch.tensor([0.3 - 0.4j, 0.2 + 0.1j], dtype=torch.complex128)

dense = torch.nn.Parameter(z.clone())
dense.grad = g.clone()
sparse = torch.nn.Parameter(z.clone())
sparse.grad = g.clone().to_sparse()
real = torch.nn.Parameter(torch.view_as_real(z).clone())  # the documented equivalent
real.grad = torch.view_as_real(g).clone()
optimizers = [torch.optim.Adagrad([p], lr=0.1) for p in (dense, sparse, real)]
for opt in optimizers:
    opt.step()

print("view_as_real equivalent:", torch.view_as_complex(real.detach()).tolist())
print("dense complex gradient: ", dense.detach().tolist())
print("sparse complex gradient:", sparse.detach().tolist(), "(imaginary parts: 1e-11, not 0.1)")
print("accumulator, documented:", torch.view_as_complex(optimizers[2].state[real]["sum"]).tolist())
print("accumulator, sparse:    ", optimizers[1].state[sparse]["sum"].tolist(), "(g * g)")
