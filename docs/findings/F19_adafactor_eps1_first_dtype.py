"""F19: torch.optim.Adafactor with eps=(None, eps2) (the default): eps1 becomes torch.finfo(dtype).eps of the
FIRST tensor the step handles in the group and then sticks for the rest of the group. With mixed dtypes in
one group, a parameter is clamped with another dtype's eps, and the for-loop and foreach steps disagree
(for-loop: first parameter in the group; foreach: first of its internal (device, dtype) buckets).
Nothing in the docs says eps1=None means anything but the parameter's own dtype's eps."""
import torch


def step(params_dtypes, foreach):
    params = [torch.nn.Parameter(torch.ones(4, dtype=dt)) for dt in params_dtypes]
    opt = torch.optim.Adafactor(params, foreach=foreach)
    for p in params:
        p.grad = torch.full_like(p, 1e-10)  # g*g = 1e-20: above float64 eps**2 (4.9e-32), below float32's (1.4e-14)
    opt.step()
    return {str(p.dtype): p[0].item() for p in params}


print("alone         :", step([torch.float32], False), step([torch.float64], False))
for foreach in (False, True):
    print(f"[f32, f64] foreach={foreach!s:5}:", step([torch.float32, torch.float64], foreach))
    print(f"[f64, f32] foreach={foreach!s:5}:", step([torch.float64, torch.float32], foreach))
