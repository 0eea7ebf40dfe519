"""The reference contract as types: one ``Protocol`` per kind, the check ``load_reference`` makes, and how the
harness reads a reference's optional members (``kind_of``, ``eager_state``, ``decisions_of``) with their
defaults spelled once.

A module keeps the contract of its ``KIND`` (``"gradient"`` when it sets none). Arrays are float64 ndarrays;
``hp`` is the param group's full hyperparameters as the torch constructor spells them (every default filled in,
Tensors as floats, pairs as tuples) plus ``dtype_eps`` and, in parity runs, ``iteration`` (docs/candidates.md).
State keys are spelled as torch spells them and compared by name; anything not an ndarray or NumPy scalar is
private to the reference. Inputs are never mutated. Where torch departs from its documented algorithm the
reference keeps the documented one and the departure is a finding, never a copied behaviour.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Literal, Protocol

if TYPE_CHECKING:
    import numpy as np

    Array = np.ndarray
else:
    Array = Any

State = dict[str, Any]
Hyperparameters = dict[str, Any]
Grad = Any  # an Array shaped like its parameter, or a sparse COO pair (indices, values), maybe uncoalesced
Decisions = list[tuple[Any, Any]]  # (value, scale) pairs of arrays or floats


class GradientReference(Protocol):
    """One tensor at a time (the default kind). ``update`` is called only on a step where the tensor has a
    gradient (torch skips it otherwise: no state change).

    Optional: ``EAGER_STATE = True`` where the documented algorithm creates state at construction for every
    parameter, gradient or not (Adagrad's accumulator). ``decisions`` where the update is discontinuous (a sign,
    a clamp choosing a branch): the value whose sign decides each element and the magnitude its rounding scales
    with; where ``|value| < 4 eps scale`` the outcome is the rounding's, so the one-step check leaves the element
    out (counted) and the free-running reference goes on from the implementation's outcome."""

    KIND: Literal["gradient"]  # optional
    EAGER_STATE: bool  # optional, False when absent

    def init(self, param: Array, hp: Hyperparameters) -> State: ...

    def update(self, param: Array, grad: Grad, state: State, hp: Hyperparameters) -> tuple[Array, State]: ...

    def decisions(self, param: Array, grad: Grad, state: State, hp: Hyperparameters) -> Decisions: ...  # optional


class ClosureReference(Protocol):
    """A closure-driven optimizer (LBFGS), on the flat vector ``x`` of its group's parameters;
    ``objective(x) -> (loss, grad)`` evaluates the seeded workload objective in float64."""

    KIND: Literal["closure"]
    EAGER_STATE: bool  # optional, False when absent

    def init(self, x: Array, hp: Hyperparameters) -> State: ...

    def step(self, x: Array, objective: Callable[[Array], tuple[float, Array]], state: State,
             hp: Hyperparameters) -> tuple[Array, State, float]: ...


class GroupReference(Protocol):
    """An optimizer whose step couples a param group's tensors (ScaledAdam clips against the group's gradient
    norm): dicts keyed by FQN in group order, every name of the group (a grad may be None), ``hp`` the group's.
    Bookkeeping of the group is a dict inside the state of its first name (a dict is private, never compared)."""

    KIND: Literal["group"]
    EAGER_STATE: bool  # optional, False when absent

    def init(self, param: Array, hp: Hyperparameters) -> State: ...

    def update_group(self, params: dict[str, Array], grads: dict[str, Grad | None], states: dict[str, State],
                     hp: Hyperparameters) -> tuple[dict[str, Array], dict[str, State]]: ...


PROTOCOLS = {"gradient": GradientReference, "closure": ClosureReference, "group": GroupReference}
OPTIONAL = ("KIND", "EAGER_STATE", "decisions")  # KIND is required only of the closure and group kinds


def required(protocol: type) -> tuple[str, ...]:
    """The functions a module of ``protocol``'s kind must define, in the protocol's order."""
    return tuple(n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_") and n not in OPTIONAL)


class ContractError(TypeError):
    """A reference module broke its contract: one line naming the module and what it lacks or returned."""


class NotAReference(ContractError, AttributeError):
    """A module found as a reference that does not keep its kind's contract (an AttributeError too, as a missing
    member is)."""


def kind_of(module) -> str:
    return getattr(module, "KIND", "gradient")


def eager_state(module) -> bool:
    return getattr(module, "EAGER_STATE", False)


def decisions_of(module) -> Callable[..., Decisions] | None:
    return getattr(module, "decisions", None)


def check(module: ModuleType, name: str) -> ModuleType:
    """``module`` if it keeps its kind's protocol, else a NotAReference naming ``name`` and the broken piece."""
    kind = kind_of(module)
    if kind not in PROTOCOLS:
        raise NotAReference(f"reference {name!r}: KIND {kind!r} is none of {', '.join(map(repr, PROTOCOLS))}")
    protocol = PROTOCOLS[kind]
    missing = [f for f in required(protocol) if not hasattr(module, f)]
    if missing:
        raise NotAReference(f"reference {name!r} has no {', '.join(missing)}(): see optbench.reference's contract "
                            f"({protocol.__name__})")
    decide = decisions_of(module)  # optional: None is its absence
    broken = [f for f in required(protocol) if not callable(getattr(module, f))] + (
        ["decisions"] if decide is not None and not callable(decide) else [])
    if broken:
        raise NotAReference(f"reference {name!r}: {broken[0]} is a {_kind(getattr(module, broken[0]))}, not a "
                            f"function: see optbench.reference's contract ({protocol.__name__})")
    if not isinstance(eager_state(module), bool):
        raise NotAReference(f"reference {name!r}: EAGER_STATE is {eager_state(module)!r}, not True or False")
    return module


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
