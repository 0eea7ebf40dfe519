"""F31: torch's fused CPU optimizers do not check that the state they are given has the parameter's
shape. torch's own positional load_state_dict attaches a checkpoint's state to whichever parameter
comes at the same position (PyTorch #1489), so loading into an optimizer whose parameters come in
another order hands a (32,) parameter a (64, 32) exp_avg and the reverse. The for-loop and foreach
steps then raise a size-mismatch RuntimeError; the fused step reads and writes past the smaller
tensor: heap corruption (glibc aborts, "corrupted double-linked list"), or silently wrong numbers.

Each optimizer runs in a child process (the corruption can kill it, or deadlock it: a child that has not
finished in 20 s is killed and counted as hung). Exits 1 when any fused step accepts the mismatched state,
crashes or hangs, 0 when every one refuses it.
Run: python docs/findings/F31_fused_cpu_state_shape.py
"""
import subprocess
import sys

CHILD = r"""
import sys, torch
name = sys.argv[1]
cls = getattr(torch.optim, name)
torch.manual_seed(0)
big, small = torch.nn.Parameter(torch.randn(64, 32)), torch.nn.Parameter(torch.randn(32))
kw = {"momentum": 0.9} if name == "SGD" else {}
opt = cls([("big", big), ("small", small)], fused=True, **kw)
for p in (big, small):
    p.grad = torch.randn_like(p)
opt.step()
state_dict = opt.state_dict()
other_order = cls([("small", small), ("big", big)], fused=True, **kw)
other_order.load_state_dict(state_dict)  # positional: big's state goes to small and the reverse
try:
    other_order.step()
except RuntimeError as exc:
    print(f"{name}: fused step refused the mismatched state: {str(exc).splitlines()[0]}")
    sys.exit(0)
print(f"{name}: fused step ran with a (64, 32) state on a (32,) parameter and a (32,) state on a (64, 32) one")
sys.exit(3)
"""

bad = 0
for name in ("Adam", "AdamW", "SGD", "Adagrad"):
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:  # glibc can deadlock in free() after the corruption
        bad += 1
        print(f"{name}: BUG: the fused CPU step hung after the mismatched state (killed after 20 s)")
        continue
    out = (done.stdout + done.stderr).strip().splitlines()
    if done.returncode == 0:
        print(out[-1])
        continue
    bad += 1
    what = ("accepted it" if done.returncode == 3
            else f"crashed (exit {done.returncode}: {out[-1] if out else 'no output'})")
    print(f"{name}: BUG: the fused CPU step {what}")
if bad:
    sys.exit(f"F31 present: {bad} of 4 fused CPU optimizers accepted state of another shape")
print("F31 absent: every fused step refused the mismatched state")
