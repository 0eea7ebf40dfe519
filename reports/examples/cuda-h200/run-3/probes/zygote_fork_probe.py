"""GPU probe: which import makes a later fork unable to use CUDA, and what a fresh worker costs."""
import os, subprocess, sys, time
STAGES = [
    ("torch", "import torch"),
    ("torch+is_available", "import torch; torch.cuda.is_available()"),
    ("torch+dynamo", "import torch, torch._dynamo"),
    ("preload", "import numpy, torch, torch._dynamo, omegaconf, optbench.engine.worker, optbench.engine.executor, optbench.engine.planner"),
    ("preload+triton", "import numpy, torch, torch._dynamo, omegaconf, optbench.engine.worker, optbench.engine.executor, optbench.engine.planner, triton"),
]
CHILD = r'''
{pre}
import os, torch
print("parent initialized:", torch.cuda.is_initialized(), "bad_fork:", torch.cuda._is_in_bad_fork() if hasattr(torch.cuda, "_is_in_bad_fork") else "?", flush=True)
pid = os.fork()
if pid == 0:
    try:
        torch.zeros(1, device="cuda").add_(1); torch.cuda.synchronize(); print("child: CUDA OK", flush=True); os._exit(0)
    except Exception as e:
        print("child:", type(e).__name__, str(e).splitlines()[0][:160], flush=True); os._exit(1)
_, st = os.waitpid(pid, 0)
'''
for env_extra in ({}, {"PYTORCH_NVML_BASED_CUDA_CHECK": "1"}):
    for name, pre in STAGES:
        t = time.time()
        r = subprocess.run([sys.executable, "-c", CHILD.format(pre=pre)], capture_output=True, text=True,
                           env={**os.environ, **env_extra}, timeout=120)
        print(f"[{name} {env_extra}] {time.time()-t:.1f}s rc={r.returncode}", (r.stdout + r.stderr[-300:]).strip().replace("\n", " | "), flush=True)
for label, code in [("import torch", "import torch"),
                    ("torch+cuda init", "import torch; torch.zeros(1,device='cuda'); torch.cuda.synchronize()"),
                    ("preload", "import numpy, torch, torch._dynamo, omegaconf, optbench.engine.worker, optbench.engine.executor, optbench.engine.planner"),
                    ("preload+cuda", "import numpy, torch, torch._dynamo, omegaconf, optbench.engine.worker, optbench.engine.executor, optbench.engine.planner; torch.zeros(1,device='cuda'); torch.cuda.synchronize()")]:
    t = time.time(); subprocess.run([sys.executable, "-c", code]); print(f"[time] {label}: {time.time()-t:.2f}s", flush=True)
