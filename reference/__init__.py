"""Float64 NumPy reference optimizers: the independent oracle.

Each module implements one optimizer from its documented algorithm as two pure functions over
one tensor, in the style of optax:

    init(param, hp) -> state            # state keys spelled as torch spells them
    update(param, grad, state, hp) -> (new_param, new_state)

``hp`` holds the group's hyperparameters as torch spells them, plus ``dtype_eps`` (machine eps of
the dtype under test, for algorithms whose defaults depend on it). Inputs are never mutated.
This package must never import torch: it is the oracle torch is judged against.
"""

from types import ModuleType

from . import adafactor, adam, adamw, sgd, sparse_adam

REFERENCES: dict[str, ModuleType] = {
    "adam": adam,
    "adamw": adamw,
    "sgd": sgd,
    "adafactor": adafactor,
    "sparse_adam": sparse_adam,
}

__all__ = ["REFERENCES"]
