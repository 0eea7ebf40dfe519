"""F20: torch.optim.SGD (for-loop) with momentum and sparse COO gradients: the momentum buffer stays a sparse
tensor whose nnz grows by the gradient's nnz every step (never coalesced), although it has only `rows` rows."""
import warnings

import torch

warnings.filterwarnings("ignore")

p = torch.nn.Parameter(torch.zeros(10, 4))
opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, foreach=False)
for t in range(2000):
    idx = torch.randint(0, 10, (8,))
    p.grad = torch.sparse_coo_tensor(idx.view(1, -1), torch.randn(8, 4), p.shape)
    opt.step()
buf = opt.state[p]["momentum_buffer"]
print("layout", buf.layout, "nnz", buf._nnz(), "coalesced", buf.is_coalesced(), "rows", p.shape[0])
