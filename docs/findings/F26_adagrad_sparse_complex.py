"""F26: torch.optim.Adagrad steps a complex parameter with sparse gradients in complex arithmetic.

torch documents that an optimizer steps a complex parameter like its torch.view_as_real equivalent (real
and imaginary parts as independent real parameters); Adagrad's dense path does. Its sparse path squares the
complex gradient values (g * g), takes a complex sqrt and divides: the first step is lr * g / sqrt(g * g),
a real +-lr, so the imaginary parts hardly move. Exit 1 while the sparse step differs from the
view_as_real step, 0 otherwise.
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore", message="Sparse invariant checks")
z = torch.tensor([1.0 + 2.0j, -3.0 + 0.5j], dtype=torch.complex128)
g = torch.tensor([0.3 - 0.4j, 0.2 + 0.1j], dtype=torch.complex128)
sparse = torch.nn.Parameter(z.clone())
sparse.grad = g.to_sparse()
real = torch.nn.Parameter(torch.view_as_real(z).clone())  # the documented equivalent
real.grad = torch.view_as_real(g).clone()
for p in (sparse, real):
    torch.optim.Adagrad([p], lr=0.1).step()
documented = torch.view_as_complex(real.detach())
print(f"sparse complex gradient: {sparse.detach().tolist()}")
print(f"view_as_real (documented): {documented.tolist()}")
if not torch.allclose(sparse.detach(), documented):
    sys.exit("F26 present: Adagrad's sparse path steps complex parameters in complex arithmetic")
print("F26 absent")
