"""Hyperparameters: YAML forms, defaults from the constructor, and the values each side sees.

A suite lists only what differs from the optimizer's defaults; ``complete`` fills in the rest from
the constructor's signature, so the reference always sees the full set. YAML has no tuples or
tensors, so lists become tuples (``betas: [0.9, 0.99]``) and ``{tensor: 0.001}`` (0-dim) or
``{tensor: [0.001]}`` (1-element) becomes a torch Tensor for the implementation and the very same
value, as a Python float, for the reference.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf

# Constructor arguments that choose how a step runs, not what it computes: never a hyperparameter of the reference.
IMPLEMENTATION_FLAGS = frozenset({"foreach", "fused", "capturable", "differentiable"})
# Group keys a checkpoint from an older torch lacks: loading one is not loading another optimizer's state.
FLAGS_NEWER_THAN_OLD_CHECKPOINTS = ("foreach", "fused", "capturable", "differentiable", "maximize",
                                    "decoupled_weight_decay")


def plain(value):
    """OmegaConf containers as plain Python (dicts and lists)."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def is_tensor_form(value) -> bool:
    return isinstance(value, Mapping) and set(value) == {"tensor"}


def torch_value(value):
    """A YAML hyperparameter as the optimizer takes it (tuples, Tensors)."""
    value = plain(value)
    if is_tensor_form(value):
        return torch.tensor(value["tensor"])  # float32 by default, as torch's own tests build it
    if isinstance(value, list):
        return tuple(torch_value(v) for v in value)
    return value


def reference_value(value):
    """A hyperparameter as the reference sees it: Tensors as the Python float torch holds."""
    value = plain(value)
    if is_tensor_form(value):
        return float(torch.tensor(value["tensor"]).reshape(-1)[0].item())
    if isinstance(value, torch.Tensor):
        return float(value.reshape(-1)[0].item())
    if isinstance(value, (list, tuple)):
        return tuple(reference_value(v) for v in value)
    return value


def constructor_defaults(optimizer_class: type) -> dict:
    """Every algorithm hyperparameter of ``optimizer_class.__init__`` with its default."""
    signature = inspect.signature(optimizer_class.__init__)
    return {
        name: p.default
        for name, p in signature.parameters.items()
        if name not in ("self", "params") and name not in IMPLEMENTATION_FLAGS
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.default is not p.empty
    }


def takes(optimizer_class: type, name: str, *, through_kwargs: bool = True) -> bool:
    """Whether the constructor takes ``name``: names it, or (``through_kwargs``) has a ``**kwargs`` that keeps it: an
    optimizer built with ``name`` given holds it in its ``defaults`` or param group, as torch.optim keeps every option
    (a subclass passing ``**kwargs`` on to torch's Adam, pytorch-optimizer's undocumented keywords), where a
    ``**kwargs`` that swallows what it does not know would take any option and ignore it. Where the class cannot be
    built so, a ``**kwargs`` takes it. The one answer to "does this optimizer take this option" in optbench."""
    try:
        parameters = inspect.signature(optimizer_class).parameters
    except (TypeError, ValueError):
        return False
    if name in parameters:
        return True
    return through_kwargs and any(p.kind is p.VAR_KEYWORD for p in parameters.values()) and _keeps(optimizer_class,
                                                                                                   name)


@lru_cache(maxsize=None)
def _keeps(optimizer_class: type, name: str) -> bool:
    """Whether an optimizer of the class built on one parameter keeps ``name`` (at its defaults, or given as None):
    not where the keyword is refused as unexpected; True where it cannot be built so otherwise (nothing to tell)."""
    for given in ({}, {name: None}):
        try:
            optimizer = optimizer_class([torch.nn.Parameter(torch.zeros(2))], **given)
        except TypeError as exc:
            return "unexpected keyword" not in str(exc)
        except Exception:
            return True
        if name in optimizer.defaults or name in optimizer.param_groups[0]:
            return True
    return False


def not_taken(optimizer_class: type, names) -> list[str]:
    """The ``names`` the constructor does not take (``takes``)."""
    return [n for n in names if not takes(optimizer_class, n)]


def complete(options: Mapping, defaults: Mapping) -> dict:
    """``defaults`` overridden by ``options``, as the reference sees them (floats, tuples)."""
    return {k: reference_value(v) for k, v in {**defaults, **plain(options)}.items()}


def for_torch(options: Mapping) -> dict:
    """``options`` as constructor keyword arguments (tuples, Tensors)."""
    return {k: torch_value(v) for k, v in plain(options).items()}


def describe(options: Mapping) -> str:
    """Short text for a report: ``lr=0.05, amsgrad=True`` (``lr=tensor(0.001)`` for Tensors)."""
    parts = []
    for key, value in plain(options).items():
        shown = f"tensor({value['tensor']})" if is_tensor_form(value) else value
        parts.append(f"{key}={shown}")
    return ", ".join(parts) or "defaults"


def as_data(value):
    """A constructor default as JSON data that ``from_data`` reads back to an equal value: numbers (non-finite
    ones too), strings, None, lists, tuples, dicts and torch dtypes; anything else as ``{"opaque": repr}``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else {"float": repr(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, (list, tuple)):
        return {"tuple" if isinstance(value, tuple) else "list": [as_data(v) for v in value]}
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {"dict": {k: as_data(v) for k, v in value.items()}}
    return {"opaque": repr(value)}


@dataclass(frozen=True)
class Opaque:
    """A constructor default the plan could keep only as its repr (a library's sentinel ``object()``): where the
    judge completes hparam sets from a candidate's defaults it stands in for the value, which no reference reads
    (one that did would meet this placeholder, not a number, and fail loudly)."""

    text: str


def from_data(data, opaque: bool = False):
    """``as_data``'s value back (ValueError for an opaque one, which cannot be rebuilt from its repr; with ``opaque``,
    an ``Opaque`` in its place)."""
    if not isinstance(data, dict):
        return data
    (kind, value), = data.items()
    if kind == "opaque" and opaque:
        return Opaque(str(value))
    if kind == "float":
        return float(value)
    if kind == "dtype":
        dtype = getattr(torch, str(value), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{value!r} is no torch dtype")
        return dtype
    if kind in ("tuple", "list"):
        items = [from_data(v, opaque) for v in value]
        return tuple(items) if kind == "tuple" else items
    if kind == "dict":
        return {str(k): from_data(v, opaque) for k, v in value.items()}
    raise ValueError(f"a default held as {kind} {value!r} cannot be rebuilt as data")
