"""F01, second face: fused CPU SGD with momentum at bfloat16 is not even deterministic. The same seed and
gradients, stepped in two fresh processes, leave different (and absurd) momentum buffers: the kernel reads
memory it never wrote. The parameters themselves agree between the runs.

Exits 1 when the two runs' momentum buffers differ, 0 when they are bit for bit the same.
Run: python docs/findings/F01_fused_sgd_nondeterministic.py
"""
import subprocess
import sys

CHILD = r"""
import torch
torch.manual_seed(0)
params = [torch.nn.Parameter(torch.randn(64, 32).bfloat16()) for _ in range(4)]
opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, fused=True)
gen = torch.Generator().manual_seed(1)
for _ in range(3):
    for p in params:
        p.grad = torch.randn(p.shape, generator=gen).bfloat16()
    opt.step()
with torch.no_grad():
    buffers = sum(opt.state[p]["momentum_buffer"].float().abs().sum().item() for p in params)
    weights = sum(p.float().abs().sum().item() for p in params)
print(repr(buffers), repr(weights))
"""

try:
    runs = [subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=30).stdout.split()
            for _ in range(2)]
except subprocess.TimeoutExpired:
    sys.exit("F01 present: a fused SGD child process hung (killed after 30 s)")
if any(len(run) != 2 for run in runs):
    sys.exit("F01 present: a fused SGD child process crashed")
for i, (buffers, weights) in enumerate(runs):
    print(f"run {i}: sum |momentum_buffer| = {buffers}, sum |param| = {weights}")
if runs[0][0] != runs[1][0]:
    sys.exit("F01 present: the same steps left different momentum buffers (the kernel reads memory it did not write)")
print("F01 absent: the momentum buffers agree between runs")
