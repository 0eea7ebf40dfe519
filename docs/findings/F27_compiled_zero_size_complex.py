"""F27: a torch.compile'd optimizer step raises on a zero-size complex parameter.

Inductor lowers an in-place complex update (param.add_, addcdiv_) through a real view of the tensor and views
the result back as complex; for a zero-size tensor the last stride it sees is 0, and the view back raises
"self.stride(-1) must be 1 to view Float as ComplexFloat". The eager step, a zero-size real parameter, and a
non-empty complex one all work, so a model with an empty complex parameter (#100701's class of bug) cannot
use a compiled optimizer.
"""
import logging
import warnings

import torch

warnings.filterwarnings("ignore")
torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)  # its traceback, printed before raising


def compiled_step(cls, shape, dtype, **options):
    torch._dynamo.reset()
    p = torch.nn.Parameter(torch.zeros(shape, dtype=dtype))
    p.grad = torch.zeros_like(p)
    try:
        torch.compile(cls([p], lr=0.1, foreach=False, **options).step)()
        return "ok"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:110]}"


for cls, options in ((torch.optim.SGD, {}), (torch.optim.Adam, {"weight_decay": 0.1})):
    for shape, dtype in (((0,), torch.complex64), ((0,), torch.float32), ((3,), torch.complex64)):
        print(f"{cls.__name__:4} {str(shape):5} {str(dtype):14} {compiled_step(cls, shape, dtype, **options)}")
