"""u-muP's lr-scaled Adam (graphcore's ``unit_scaling.optim.Adam``), as its documentation specifies it.

The documentation: "An lr-scaled version of torch.optim.Adam for u-muP" (the Adam algorithm itself as
torch.optim.Adam documents it, ``reference.adam``), where each parameter's learning rate is the
group's lr times a factor read from the u-muP metadata the parameter carries (``mup_type`` and
``mup_scaling_depth``, as ``unit_scaling.Parameter`` and ``unit_scaling.DepthSequential`` set them),
the rule of the u-muP paper (Blake et al., 2024, arXiv:2407.17465) for Adam:

* ``weight`` (hidden weights, and the embedding): ``fan_in ** -0.5``, with the usual fan-in of a weight
  of shape ``(out, in, *kernel)``, ``in * prod(kernel)``; for an embedding ``(vocab, width)`` that is
  the width, the paper's ``fan_out ** -0.5`` for input weights. A weight needs at least 2 dims to
  have a fan-in;
* ``bias``, ``norm`` and ``output`` (the readout): 1;
* times ``mup_scaling_depth ** -0.5`` for a parameter inside a depth-scaled residual stack
  (``mup_scaling_depth`` not None).

``weight_decay`` is Adam's (L2, added to the gradient); with ``independent_weight_decay`` (default
True) each parameter's coefficient is ``weight_decay`` divided by its own scaled lr ("lr-independent
weight decay", ``unit_scaling.optim.scaled_parameters``). Note that within Adam's normalised update
this does not make the decay per step independent of lr as documented (docs/findings.md, F34):
``reference_options: {independent_weight_decay_as: decoupled}`` makes this reference apply the
documented per-step decay instead (``p *= 1 - weight_decay``, which AdamW's decoupled form of the
same coefficient gives), to show the difference.

``hp["param_meta"]`` carries a parameter's metadata (optbench.numerics.trajectory); a parameter without it (or
with a ``mup_type`` u-muP does not define) is not u-muP's: it is stepped with the unscaled lr when
``allow_non_unit_scaling_params`` is True, and is an error otherwise (the optimizer must reject it).
unit_scaling's constructor hides betas, eps, amsgrad and maximize in ``**kwargs``, so hp may lack
them: they default as torch.optim.Adam documents.
"""

import math

import numpy as np

from . import adam

MUP_TYPES = ("weight", "bias", "norm", "output")
# torch.optim.Adam's documented defaults, for what unit_scaling.optim.Adam's signature does not name.
ADAM_DEFAULTS = {"betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False, "maximize": False,
                 "decoupled_weight_decay": False}


def fan_in(shape: tuple[int, ...]) -> int:
    """The fan-in of a weight of ``shape``: ``(out, in, *kernel)`` -> in * prod(kernel)."""
    if len(shape) < 2:
        raise ValueError(f"a u-muP weight needs at least 2 dims to have a fan-in, got shape {tuple(shape)}")
    return math.prod(shape[1:])


def lr_scale(meta: dict | None, shape: tuple[int, ...], allow_plain: bool) -> float:
    """The factor on the group's lr for a parameter with u-muP metadata ``meta`` (None: none)."""
    mup_type = (meta or {}).get("mup_type")
    if mup_type not in MUP_TYPES:
        if not allow_plain:
            raise ValueError(f"a parameter without u-muP metadata (shape {tuple(shape)}) with "
                             "allow_non_unit_scaling_params=False: the optimizer must reject it")
        return 1.0
    depth = meta.get("mup_scaling_depth")
    scale = 1.0 if depth is None else depth**-0.5
    return scale * fan_in(shape) ** -0.5 if mup_type == "weight" else scale


def _adam_hp(param: np.ndarray, hp: dict) -> tuple[dict, bool]:
    """The Adam hyperparameters of this parameter, and whether the decay is applied apart (documented form)."""
    full = {**ADAM_DEFAULTS, **hp}
    lr = full["lr"] * lr_scale(full.get("param_meta"), param.shape,
                               bool(full.get("allow_non_unit_scaling_params", False)))
    weight_decay = full.get("weight_decay", 0.0)
    apart = False
    if full.get("independent_weight_decay", True) and weight_decay != 0:
        if full.get("independent_weight_decay_as", "l2") == "decoupled":
            apart = True
        else:
            weight_decay = weight_decay / lr
    return {**full, "lr": lr, "weight_decay": 0.0 if apart else weight_decay}, apart


def init(param: np.ndarray, hp: dict) -> dict:
    return adam.init(param, {**ADAM_DEFAULTS, **hp})


def update(param: np.ndarray, grad: np.ndarray, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
    step_hp, apart = _adam_hp(param, hp)
    if apart:  # the documented lr-independent decay: the same fraction of the parameter every step
        param = param * (1.0 - hp["weight_decay"])
    return adam.update(param, grad, state, step_hp)
