"""A candidate spec applied to a live optimizer (``optbench.watch``): its param groups' options read as the
reference's (``rename`` read back, ``conventions`` over them, ``held_as`` rounding), its state read through the spec
(``state``: keys, ignore, step, decode), and the options a group sets that the reference never reads, named.

The spec's ``prepare`` is not run: a training loop's optimizer is already in the mode it trains in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import torch

from optbench.adapters.held_as import held
from optbench.adapters.spec import CandidateSpec, load_spec_file
from optbench.adapters.state import AdaptedState, adapts, decoder, skipped
from optbench.hyperparameters import IMPLEMENTATION_FLAGS, constructor_defaults


def loaded(adapter) -> CandidateSpec | None:
    """``adapter`` as a CandidateSpec: one already, or the path of a spec file; None stays None."""
    if adapter is None or isinstance(adapter, CandidateSpec):
        return adapter
    return load_spec_file(Path(adapter))


def state_reader(spec: CandidateSpec | None, optimizer) -> Callable[[], Mapping] | None:
    """A reader of each parameter's state as the reference keeps it, where the spec adapts it (None: as it is)."""
    return AdaptedState(optimizer, spec, decoder(spec)) if spec is not None and adapts(spec) else None


def left_out(spec: CandidateSpec | None) -> frozenset[str]:
    """State keys compared on neither side (``ignore``, and ``step`` where the spec keeps none)."""
    return skipped(spec) if spec is not None else frozenset()


def reference_options(spec: CandidateSpec | None, options: dict) -> dict:
    """A group's options (the class's names, as the reference takes values) as the reference's options."""
    if spec is None:
        return options
    return held({**spec.as_reference(options), **spec.conventions}, spec)


NOT_OPTIONS = frozenset({"params", "param_names", "initial_lr", "dtype_eps"})  # torch's and optbench's bookkeeping


def unmodelled(reference, options: dict, defaults: Mapping) -> list[str]:
    """The options set (a true number, flag or tuple) other than the class's ``defaults`` whose value does not change
    the reference's steps (two seeded steps from scratch, state included, against the option at the class's default
    or left out): what the reference does not model (pytorch-optimizer's ``cautious``, ``use_gc``), so its verdict is
    about the step without them. (A class's own defaults are what its adapter was judged at.)"""
    suspects = [k for k, v in options.items() if k not in IMPLEMENTATION_FLAGS and k not in NOT_OPTIONS
                and not k.startswith("_") and isinstance(v, (bool, int, float, tuple)) and _set(v)
                and not _same(v, defaults.get(k, object()))]
    try:
        steps = _steps(reference, options)
    except Exception:  # the reference cannot step a small random vector with these options: nothing to tell
        return []
    out = []
    for k in suspects:
        other = {**options, k: defaults[k]} if k in defaults else {o: v for o, v in options.items() if o != k}
        try:
            if _equal(steps, _steps(reference, other)):
                out.append(k)
        except Exception:  # the reference needs it: it models it
            continue
    return sorted(out)


def _steps(reference, options: dict) -> list:
    rng = np.random.default_rng(0)
    param = rng.normal(size=4)
    state = reference.init(param, dict(options))
    for _ in range(2):
        param, state = reference.update(param, rng.normal(size=4), state, dict(options))
    return [np.asarray(param, dtype=float), *(np.asarray(v, dtype=float) for _, v in sorted(state.items())
                                               if isinstance(v, (np.ndarray, float, int, np.floating)))]


def _equal(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b))


def _set(value) -> bool:
    try:
        return bool(value)
    except Exception:  # a Tensor of several elements, say: set
        return True


def default_options(cls: type) -> dict:
    """What a param group of ``cls`` holds at the class's defaults (built on one parameter: torch's AdamW keeps
    ``decoupled_weight_decay=True`` that its signature does not name), else its constructor's defaults."""
    try:
        return {k: v for k, v in cls([torch.nn.Parameter(torch.zeros(1))]).param_groups[0].items() if k != "params"}
    except Exception:
        return constructor_defaults(cls)


def _same(value, default) -> bool:
    try:
        return bool(value == default)
    except Exception:
        return False
