"""F61: DeepSpeed 0.19.8's CPU optimizers step state of another shape than the parameter: heap corruption, a crash.

Their C++ step functions (``ds_adam_step``, ``ds_adagrad_step``, ``ds_lion_step``) check neither shapes nor sizes:
the kernel runs over ``params.numel()`` elements of every state tensor it is given. torch's positional
``load_state_dict`` (which these classes inherit) attaches a checkpoint's state to whichever parameter has the same
position, so a checkpoint whose parameters come in another order gives a (64,) parameter a (4,) ``exp_avg``; the
next ``step()`` writes past that tensor's storage: glibc aborts, the process segfaults, or it goes on with corrupted
memory. torch.optim's for-loop Adam raises a size-mismatch RuntimeError instead (its fused CPU step shares the bug:
F31). Each class is stepped in a child process. Exit 1 while any child dies of a signal or steps without an error,
0 when every class refuses; 2 when deepspeed is not installed.
"""
import subprocess
import sys

CHILD = """
import sys, torch
from deepspeed.ops.adam import DeepSpeedCPUAdam
from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad
from deepspeed.ops.lion import DeepSpeedCPULion
classes = {"torch": torch.optim.Adam, "adam": DeepSpeedCPUAdam, "adagrad": DeepSpeedCPUAdagrad,
           "lion": DeepSpeedCPULion}
cls = classes[sys.argv[1]]
small, big = torch.nn.Parameter(torch.ones(4)), torch.nn.Parameter(torch.ones(64, 64))
opt = cls([small, big], lr=0.1)
for p in (small, big):
    p.grad = torch.ones_like(p)
opt.step()
saved = opt.state_dict()
again = cls([big, small], lr=0.1)  # the same model, its parameters listed in the other order
again.load_state_dict(saved)      # positional: big gets small's (4,) state
for p in (small, big):
    p.grad = torch.ones_like(p)
for _ in range(20):
    again.step()
"""
try:
    import deepspeed  # noqa: F401
except ImportError:
    print("cannot run: deepspeed is not installed", file=sys.stderr)
    sys.exit(2)

broken = []
for name in ("torch", "adam", "adagrad", "lion"):
    r = subprocess.run([sys.executable, "-c", CHILD, name], capture_output=True, text=True, timeout=600)
    last = (r.stderr.strip().splitlines() or [""])[-1][:120]
    if r.returncode < 0:
        outcome = f"killed by signal {-r.returncode}"
    else:
        outcome = "stepped without an error" if r.returncode == 0 else f"raised: {last}"
    print(f"{name}: state of another shape loaded, then step(): {outcome}")
    if name != "torch" and (r.returncode <= 0):
        broken.append(f"{name} ({outcome})")
if broken:
    print(f"F61 present: {', '.join(broken)}", file=sys.stderr)
sys.exit(1 if broken else 0)
