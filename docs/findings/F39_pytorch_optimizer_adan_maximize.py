"""F39: pytorch-optimizer's Adan with maximize=True takes a wrong first step: its first gradient difference is
-2 g instead of 0.

Adan's difference g_k - g_{k-1} is 0 at the first step (the previous gradient is the first one). pytorch-optimizer
4.1.0 remembers the first gradient before maximize negates it, so under maximize the first difference is
(-g) - g = -2 g: exp_avg_diff starts at (1 - b2)(-2 g) instead of 0 (0.137 where it should be 0 below) and
the second moment's Nesterov term is wrong from the first step; later steps carry the wrong difference (optbench:
1.66e4 float32 eps of the update on its workload). Without maximize the step is right.
Plain check: maximize on g must equal minimize on -g, bit for bit. Exit 1 while the two differ, 0 otherwise; 2 when
pytorch-optimizer is not installed.
"""
import sys

import torch

try:
    from pytorch_optimizer import Adan
except ImportError:
    print("cannot run: pytorch-optimizer is not installed", file=sys.stderr)
    sys.exit(2)

torch.manual_seed(0)
start, grad = torch.randn(4, 3, dtype=torch.float64), torch.randn(4, 3, dtype=torch.float64)
runs = {}
for maximize, g in ((True, grad), (False, -grad)):
    p = torch.nn.Parameter(start.clone())
    opt = Adan([p], lr=1e-2, maximize=maximize)
    p.grad = g.clone()
    opt.step()
    runs[maximize] = (p.detach().clone(), opt.state[p]["exp_avg_diff"].clone())
(p_max, diff_max), (p_min, diff_min) = runs[True], runs[False]
print("exp_avg_diff after step 1, maximize on g :", diff_max.flatten()[:3].tolist())
print("exp_avg_diff after step 1, minimize on -g:", diff_min.flatten()[:3].tolist())
print("largest parameter difference:", float((p_max - p_min).abs().max()))
if not torch.equal(p_max, p_min):
    sys.exit("F39 present: Adan under maximize starts from a gradient difference of -2 g")
print("F39 absent")
