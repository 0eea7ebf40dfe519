"""F27: a torch.compile'd optimizer step raises on a zero-size complex parameter.

Inductor lowers the in-place complex update through a real view and views the result back as complex;
for a zero-size tensor the last stride it sees is 0 and the view back raises "self.stride(-1) must be 1 to
view Float as ComplexFloat". Expected (and what eager, a zero-size real parameter and a non-empty complex
one do): the step runs. Exit 1 while the compiled step raises, 0 otherwise.
"""
import logging
import sys
import warnings

import torch

warnings.filterwarnings("ignore")
torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)
logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
failed = False
for dtype in (torch.float32, torch.complex64):
    torch._dynamo.reset()
    p = torch.nn.Parameter(torch.zeros(0, dtype=dtype))
    p.grad = torch.zeros_like(p)
    try:
        torch.compile(torch.optim.SGD([p], lr=0.1, foreach=False).step)()
        print(f"compiled SGD step, zero-size {dtype} parameter: ok")
    except Exception as exc:  # torch._inductor.exc.InductorError
        failed = True
        print(f"compiled SGD step, zero-size {dtype} parameter: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
if failed:
    sys.exit("F27 present: a compiled step raises on a zero-size complex parameter")
print("F27 absent")
