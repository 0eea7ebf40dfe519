"""Float64 NumPy reference optimizers: the independent oracle torch is judged against.

The contract every module here keeps (one optimizer per module, written from the documented
algorithm, never importing torch):

    init(param, hp) -> state
    update(param, grad, state, hp) -> (new_param, new_state)

* ``param`` is a float64 ndarray of any shape (0-dim included, size 0 included); ``grad`` is a
  float64 ndarray of the same shape, or for a sparse gradient a ``(indices, values)`` COO pair that
  may be uncoalesced or hold explicit zeros (see ``sparse.coalesce``). A parameter whose gradient is
  None that step is not passed at all (torch skips it: no state change).
* ``hp`` holds the param group's full hyperparameters, spelled as the torch constructor spells them,
  with every default filled in (Tensor hyperparameters arrive as Python floats, pairs as tuples),
  plus ``dtype_eps``: machine eps of the dtype under test, for algorithms whose defaults use it, and
  (in parity runs) ``iteration``: the optimizer's ``step()`` calls so far, this one included, for an
  algorithm whose documented implementation counts steps per param group (every call, whether this
  tensor had a gradient or not) rather than per tensor; absent elsewhere (``optbench.watch``).
* State keys are spelled as torch spells them (``step``, ``exp_avg``, ``square_avg``, ...) so state is
  compared by name; values are float64 ndarrays or NumPy scalars. Anything else a reference keeps
  (a list, a string) is private to it and is not compared. Inputs are never mutated.
* A module whose documented algorithm creates state at construction, for every parameter whether it
  ever gets a gradient or not (Adagrad's accumulator), sets ``EAGER_STATE = True``.
* A module whose update is discontinuous (a sign, a clamp choosing a branch) may define
  ``decisions(param, grad, state, hp) -> [(value, scale), ...]``: the value whose sign decides each element
  (Lion's interpolated momentum; a clamp's input minus its boundary) and the magnitude its rounding scales
  with. Where ``|value| < 4 eps scale`` the outcome is the rounding's: the one-step check leaves the element
  out (counted) and the free-running reference goes on from the implementation's outcome there.
* Where torch departs from its documented algorithm, the reference keeps the documented algorithm
  (in float64) and the departure is a finding (docs/findings.md), never a copied behaviour.

A closure-driven optimizer (LBFGS) sets ``KIND = "closure"`` and works on the flat vector of its
group's parameters instead:

    init(x, hp) -> state
    step(x, objective, state, hp) -> (new_x, new_state, loss)

where ``objective(x) -> (loss, grad)`` evaluates the seeded workload objective in float64.

An optimizer whose step couples the tensors of a param group (ScaledAdam clips against the group's
gradient norm) sets ``KIND = "group"`` and steps a whole group at once:

    init(param, hp) -> state
    update_group(params, grads, states, hp) -> (new_params, new_states)

with dicts keyed by FQN in group order (every name of the group; a grad may be None), and ``hp`` the
group's hyperparameters. Bookkeeping of the group (clipping statistics) is a dict inside the state of
the group's first name: a dict is private, never compared.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from types import ModuleType

NOT_REFERENCES = {"sparse", "complex"}  # helpers: sparse COO gradients, complex parameters (complex.as_complex)


def builtin_names() -> list[str]:
    """The references shipped with optbench (module names in this package)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__)
                  if m.name not in NOT_REFERENCES and not m.name.startswith("_"))


def load_reference(name: str) -> ModuleType:
    """A reference module by built-in name (``adam``), else by module path (``my_pkg.ref.lion``, or a plain
    ``lion_reference`` module), importable from the working directory or installed."""
    own = "." not in name and name in builtin_names()
    if not own and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a user's reference module in the current directory
    module = importlib.import_module(f"{__name__}.{name}" if own else name)
    kind = getattr(module, "KIND", "gradient")
    needed = {"closure": ("init", "step"), "group": ("init", "update_group")}.get(kind, ("init", "update"))
    missing = [f for f in needed if not callable(getattr(module, f, None))]
    if missing:
        raise AttributeError(f"reference {name!r} has no {', '.join(missing)}(): see optbench.reference's contract")
    return module


class ContractError(TypeError):
    """A reference module broke the contract above: one line naming the module and what it returned."""


def _kind(value) -> str:
    return "None" if value is None else type(value).__name__


def updated(module, result) -> tuple:
    """``update``'s ``result`` if it is ``(new_param, new_state dict)``, else a ContractError naming ``module``."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict):
        return result
    module = getattr(module, "reference", module)  # a complex parameter's wrapper (complex.as_complex): its module
    shown = f"({', '.join(map(_kind, result))})" if isinstance(result, tuple) else _kind(result)
    raise ContractError(f"reference {getattr(module, '__name__', module)}: update() must return (param, state dict), "
                        f"returned {shown}")


__all__ = ["ContractError", "builtin_names", "load_reference", "updated"]
