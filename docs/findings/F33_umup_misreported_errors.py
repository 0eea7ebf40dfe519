"""F33: unit_scaling.optim.Adam reports inputs it cannot take with wrong or misleading errors.

* a 0-dim mup_type="weight" parameter: ValueError "Cannot get fan_in of `ndim >= 4` param, shape=()"
  (_get_fan_in handles ndim 1, 2 and 3 and says ndim >= 4 for everything else);
* a weight whose fan-in is 0 (shape (n, 0), or (0,)): ZeroDivisionError "0.0 cannot be raised to a
  negative power" (fan_in ** -0.5), where a zero-size parameter is fine for torch.optim.Adam;
* a single Tensor as params, tagged as u-muP asks: "Non-unit-scaling parameter (no mup_type), shape (3,)"
  (it iterates the tensor's rows); torch.optim.Adam: TypeError "params argument given to the optimizer
  should be an iterable of Tensors or dicts";
* a parameter twice in one group: ValueError "some parameters appear in more than one parameter group"
  (each parameter becomes a group of its own); torch.optim.Adam warns and keeps one.
Exit 1 while any of them is reported so, 0 otherwise; 2 when unit-scaling is not installed.
"""
import sys
import warnings

import torch

try:
    import unit_scaling as uu
    from unit_scaling.optim import Adam
except ImportError:
    print("cannot run: unit-scaling is not installed", file=sys.stderr)
    sys.exit(2)


def weight(*shape):
    return uu.Parameter(torch.ones(shape), mup_type="weight")


present = 0
for what, build in (("0-dim weight", lambda: Adam([weight()], lr=1e-3)),
                    ("(3, 0) weight", lambda: Adam([weight(3, 0)], lr=1e-3)),
                    ("a single tagged Tensor", lambda: Adam(weight(4, 3), lr=1e-3)),
                    ("a parameter twice in one group", lambda: (lambda w: Adam([w, w], lr=1e-3))(weight(4, 3)))):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build()
        print(f"{what}: accepted")
    except Exception as exc:
        print(f"{what}: {type(exc).__name__}: {exc}")
        misleading = ("ndim >= 4" in str(exc) and what.startswith("0-dim")) or isinstance(exc, ZeroDivisionError) \
            or "no mup_type" in str(exc) or "more than one parameter group" in str(exc)
        present += misleading
print("torch.optim.Adam on a (3, 0) parameter:",
      torch.optim.Adam([torch.nn.Parameter(torch.ones(3, 0))]).param_groups[0]["lr"])
if present:
    sys.exit(f"F33 present: {present} of 4 inputs reported with wrong or misleading errors")
print("F33 absent")
