"""Float64 NumPy references: the independent oracle torch is judged against.

One optimizer per module, written from the documented algorithm, never importing torch. Each keeps the contract
of its kind, written as typing Protocols in ``optbench.reference.contract``: ``GradientReference`` (the default:
``init``, ``update``; optional ``EAGER_STATE``, ``decisions``), ``ClosureReference`` (``KIND = "closure"``, LBFGS:
``init``, ``step``) and ``GroupReference`` (``KIND = "group"``, ScaledAdam: ``init``, ``update_group``).
``load_reference`` checks a module against its kind's protocol; docs/candidates.md spells the contract out for
users.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from types import ModuleType

from .contract import ContractError, NotAReference, check, updated

NOT_REFERENCES = {"sparse", "complex", "contract", "group_step"}  # helpers: sparse COO gradients, complex parameters,
# the contract, a step counter per param group


def builtin_names() -> list[str]:
    """The references shipped with optbench (module names in this package)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__)
                  if m.name not in NOT_REFERENCES and not m.name.startswith("_"))


def load_reference(name: str) -> ModuleType:
    """A reference module by built-in name (``adam``), else by the name an ``optbench.references`` plugin gives it
    (``optbench.plugins``), else by module path (``my_pkg.ref.lion``, or a plain ``lion_reference`` module),
    importable from the working directory or installed."""
    from optbench.plugins import reference_module

    own = "." not in name and name in builtin_names()
    path = f"{__name__}.{name}" if own else reference_module(name) if "." not in name else None
    if path is None and os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # a user's reference module in the current directory
    module = importlib.import_module(path or name)
    return check(module, name)


__all__ = ["ContractError", "NotAReference", "builtin_names", "load_reference", "updated"]
