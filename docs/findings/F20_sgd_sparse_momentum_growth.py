"""F20: SGD's momentum buffer for sparse gradients is never coalesced: it grows without bound.

With sparse COO gradients and momentum the for-loop SGD keeps momentum_buffer sparse and adds each step's
entries without coalescing. The values are right (they equal a dense buffer's), but the buffer's entry
count grows with the steps on a 10-row parameter, and each step gets slower. PyTorch #3129 reported this
in 2017 and #3139 fixed it (dense buffer); today's code is sparse again.
Exit 1 while the buffer holds more entries than the parameter has rows, 0 otherwise.
"""
import sys
import warnings

import torch

warnings.filterwarnings("ignore", message="Sparse invariant checks")
torch.manual_seed(0)
sparse = torch.nn.Parameter(torch.zeros(10, 4, dtype=torch.float64))
dense = torch.nn.Parameter(torch.zeros(10, 4, dtype=torch.float64))
opts = [torch.optim.SGD([p], lr=0.1, momentum=0.9, foreach=False) for p in (sparse, dense)]
for _ in range(500):
    g = torch.sparse_coo_tensor(torch.randint(0, 10, (1, 8)), torch.randn(8, 4, dtype=torch.float64), (10, 4))
    sparse.grad, dense.grad = g, g.to_dense()
    for opt in opts:
        opt.step()
buf = opts[0].state[sparse]["momentum_buffer"]
diff = (buf.to_dense() - opts[1].state[dense]["momentum_buffer"]).abs().max().item()
print(f"after 500 steps: buffer {buf.layout}, {buf._nnz()} entries for 10 rows, coalesced {buf.is_coalesced()}; "
      f"max |sparse buffer - dense buffer| = {diff:.2g}")
if buf._nnz() > 10:
    sys.exit("F20 present: SGD's sparse momentum buffer is never coalesced")
print("F20 absent")
