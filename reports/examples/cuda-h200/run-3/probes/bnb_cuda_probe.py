"""bitsandbytes 0.50.2 on CUDA: (A) zero-size parameters per class, each in its own process; (B) AdamW8bit's
state trajectory on CUDA, saved for offline comparison; (C) quantize_blockwise on CUDA vs CPU."""
import os, subprocess, sys, json, time
OUT = os.environ.get("OUT", "/tmp")
DEV = os.environ.get("DEV", "cuda")
CLASSES = ["Adam", "AdamW", "Adam8bit", "AdamW8bit", "PagedAdamW8bit", "Lion", "Lion8bit", "SGD", "SGD8bit",
           "RMSprop", "RMSprop8bit", "Adagrad", "Adagrad8bit", "LAMB", "LARS", "AdEMAMix", "AdEMAMix8bit"]
CHILD = r'''
import sys, torch, bitsandbytes.optim as O
cls, dev, mixed = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
kw = {"lr": 1e-3}
if cls.startswith(("SGD", "LARS")): kw["momentum"] = 0.9
ps = [torch.zeros(0, device=dev, requires_grad=True)]
if mixed: ps = [torch.ones(8192, device=dev, requires_grad=True)] + ps
for p in ps: p.grad = torch.ones_like(p)
opt = getattr(O, cls)(ps, **kw)
opt.step()
if dev == "cuda": (torch.cuda.synchronize() if DEV == 'cuda' else None)
print("stepped", flush=True)
'''
t = time.time()
jobs = {}
for cls in CLASSES:
    for dev, mixed in ((DEV, "0"), (DEV, "1"), ("cpu", "0")):
        if dev == "cpu" and DEV != "cpu" and cls not in ("AdamW8bit", "AdamW", "Lion8bit"):
            continue
        jobs[(cls, dev, mixed)] = subprocess.Popen([sys.executable, "-c", CHILD, cls, dev, mixed], stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, text=True)
zero = {}
for k, p in jobs.items():
    try:
        o, e = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill(); o, e = "", "TIMEOUT"
    zero["/".join(k)] = {"rc": p.returncode, "out": o.strip()[-200:], "err": e.strip()[-300:]}
    print("A", k, p.returncode, o.strip()[-40:], e.strip().splitlines()[-1][:160] if e.strip() else "", flush=True)
json.dump(zero, open(f"{OUT}/bnb_zero.json", "w"), indent=1)
print(f"A done {time.time()-t:.1f}s", flush=True)

import torch, bitsandbytes as bnb, bitsandbytes.functional as F
torch.manual_seed(0)
# B: trajectories on CUDA
traj = {}
for dtype in (torch.float32, torch.bfloat16):
    shapes = {"w2d": (64, 256), "v5000": (5000,), "big": (40000,)}
    g = torch.Generator().manual_seed(1)
    params = {n: (torch.randn(s, generator=g) * 0.5).to(dtype) for n, s in shapes.items()}
    ps = {n: v.clone().to(DEV).requires_grad_(True) for n, v in params.items()}
    opt = bnb.optim.AdamW8bit(list(ps.values()), lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    steps = []
    for k in range(6):
        grads = {n: (torch.randn(shapes[n], generator=g) * (10.0 if k == 3 else 1.0)).to(dtype) for n in shapes}
        if k == 4: grads["big"][7] = 1e3
        before = {n: {"p": ps[n].detach().cpu().clone(), "state": {s: (v.detach().cpu().clone() if torch.is_tensor(v) else v)
                      for s, v in opt.state[ps[n]].items()}} for n in shapes}
        for n in shapes: ps[n].grad = grads[n].to(DEV)
        opt.step(); (torch.cuda.synchronize() if DEV == 'cuda' else None)
        after = {n: {"p": ps[n].detach().cpu().clone(), "state": {s: (v.detach().cpu().clone() if torch.is_tensor(v) else v)
                     for s, v in opt.state[ps[n]].items()}} for n in shapes}
        steps.append({"grads": grads, "before": before, "after": after})
    traj[str(dtype)] = {"init": params, "steps": steps, "group": {k: v for k, v in opt.param_groups[0].items() if k != "params"}}
# C: quantize_blockwise on both devices
x = torch.randn(8192, generator=torch.Generator().manual_seed(2)) * 3
code = F.create_dynamic_map(signed=True)
qc, sc = F.quantize_blockwise(x.to(DEV), code=code.to(DEV), blocksize=256)
qp, sp = F.quantize_blockwise(x, code=code, blocksize=256)
quant = {"x": x, "code": code, "cuda_codes": qc.cpu(), "cuda_absmax": sc.absmax.cpu(), "cpu_codes": qp, "cpu_absmax": sp.absmax}
print("C codes differ:", int((qc.cpu() != qp).sum()), "of", qp.numel(), flush=True)
torch.save({"traj": traj, "quant": quant}, f"{OUT}/bnb_traj.pt")
print(f"B,C done {time.time()-t:.1f}s", flush=True)
