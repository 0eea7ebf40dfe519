"""optbench: verify and time PyTorch optimizers against independent float64 references.

What a user's code and an extension need, by name (the rest of the package is optbench's own):

* state_dicts by parameter name: ``load_state_dict_by_name``, ``name_aware``, ``with_param_names`` and the three
  formats (``to_flat``, ``from_flat``, ``to_name_keyed``, ``from_name_keyed``, ``as_torch``, ``optimizer_from_dict``);
  parity in a training loop: ``watch``, ``Divergence``;
* a check: ``register_check`` (``optbench.checks.registry``), the ``Check`` protocol, ``Case``, ``Outcome``,
  ``RunContext`` (its ``settings``: ``Settings``, ``Block``), ``row`` and ``Row`` (one result row), the status
  groups (``PASSING``, ``FAILING``, ``DECLARED``, ``NO_VERDICT``);
* a reference: the protocols of its three kinds (``GradientReference``, ``ClosureReference``, ``GroupReference``),
  ``load_reference``;
* an adapter key: ``adapter_key`` (``optbench.adapters.registry``), ``CandidateSpec``, ``CandidateSpecError``;
* results: ``load_run``, ``verdict``; plugins: ``plugins`` (``optbench.plugins``, entry point groups ``GROUPS``);
* a run from Python: ``run`` (``optbench run``'s overrides; its ``Results``) and ``exit_code``.

The extension names import on first use, so ``import optbench`` stays as light as the state_dict helpers need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names below, for type checkers and readers (imported on first use at run time)
    from . import plugins
    from .adapters.registry import CandidateSpecError, adapter_key  # noqa: F401
    from .adapters.spec import CandidateSpec  # noqa: F401
    from .cases import Case, Outcome, RunContext  # noqa: F401
    from .checks.base import Check  # noqa: F401
    from .checks.registry import register_check  # noqa: F401
    from .engine.direct import exit_code, run  # noqa: F401
    from .reference import load_reference  # noqa: F401
    from .reference.contract import ClosureReference, GradientReference, GroupReference  # noqa: F401
    from .results import DECLARED, FAILING, NO_VERDICT, PASSING, load_run, verdict  # noqa: F401
    from .rows import Row, row  # noqa: F401
    from .settings import Block, Settings  # noqa: F401

_LAZY = {
    "register_check": "optbench.checks.registry", "Check": "optbench.checks.base", "Case": "optbench.cases",
    "Outcome": "optbench.cases", "RunContext": "optbench.cases", "row": "optbench.rows", "Row": "optbench.rows",
    "PASSING": "optbench.results", "FAILING": "optbench.results", "DECLARED": "optbench.results",
    "NO_VERDICT": "optbench.results", "load_run": "optbench.results", "verdict": "optbench.results",
    "GradientReference": "optbench.reference.contract", "ClosureReference": "optbench.reference.contract",
    "GroupReference": "optbench.reference.contract", "load_reference": "optbench.reference",
    "adapter_key": "optbench.adapters.registry", "CandidateSpecError": "optbench.adapters.registry",
    "CandidateSpec": "optbench.adapters.spec", "Settings": "optbench.settings", "Block": "optbench.settings",
    "run": "optbench.engine.direct", "exit_code": "optbench.engine.direct",
}


def __getattr__(name: str):
    if name == "plugins":
        return importlib.import_module("optbench.plugins")
    if name in _LAZY:
        if name == "register_check":
            importlib.import_module("optbench.checks")  # the built-in checks first: a new one runs after them
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'optbench' has no attribute {name!r}")


# after __getattr__: a plugin these imports load may import an extension name from optbench already
from .state.by_name import load_state_dict_by_name, name_aware, with_param_names  # noqa: E402
from .state.formats import as_torch, from_flat, from_name_keyed, optimizer_from_dict, to_flat, to_name_keyed  # noqa: E402
from .version import VERSION as __version__  # noqa: E402
from .watch import Divergence, watch  # noqa: E402

__all__ = ["load_state_dict_by_name", "name_aware", "with_param_names", "as_torch", "from_flat", "from_name_keyed",
           "optimizer_from_dict", "to_flat", "to_name_keyed", "watch", "Divergence", "__version__", "plugins",
           *_LAZY]
