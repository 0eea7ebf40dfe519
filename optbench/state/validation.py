"""What the by-name loader (``optbench.state.by_name``) refuses before it touches the optimizer, and how it keeps a
failed load from changing it: every state tensor of the wrong shape (finding F31: a fused CPU step does not check
and corrupts memory), state it cannot attribute to a named parameter, another optimizer class's state."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache

import torch

from optbench.hyperparameters import FLAGS_NEWER_THAN_OLD_CHECKPOINTS
from optbench.state.batched import BATCH_NAMES, per_parameter_state
from optbench.state.names import StateDictNameError

# The state of torch's and optbench's optimizers that is not parameter-shaped. Scalars: a 0-dim tensor (or one
# element: an old capturable checkpoint's step). Factored: exactly this shape (Adafactor's row and column second
# moments of a parameter with 2 or more dims). Per step: this many dims (ScaledAdam's last size_update_period sums).
SCALAR_KEYS = frozenset({"step", "eta", "mu", "mu_product", "param_rms", "scale_exp_avg_sq"})
FACTORED_KEYS = {"row_var": lambda s: s[:-1] + (1,), "col_var": lambda s: s[:-2] + (1,) + s[-1:]}
PER_STEP_KEYS = {"scale_grads": 1}
# Their parameter-shaped state: exactly the parameter's shape, whatever the current optimizer holds.
PARAMETER_SHAPED_KEYS = frozenset({"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "exp_inf", "momentum_buffer", "sum",
                                   "square_avg", "acc_delta", "grad_avg", "ax", "prev", "step_size", "delta",
                                   "variance"})
# bitsandbytes' 8-bit blockwise state, nested under its __bnb_optimizer_quant_state__ key: besides the uint8 codes
# (parameter-shaped), the quantization maps, (256,) for every parameter, and one absmax per block of 256 elements
# (its optimizers' block size; docs/quantization.md).
BNB_QUANT = "__bnb_optimizer_quant_state__."
QUANTIZATION_MAP_KEYS = {BNB_QUANT + "qmap1": (256,), BNB_QUANT + "qmap2": (256,)}
BLOCK_SCALE_KEYS = {BNB_QUANT + "absmax1": 256, BNB_QUANT + "absmax2": 256}
# Another library's 8-bit block-wise state kept at the top of a parameter's state: recognised by its uint8 codes of the
# parameter's shape; beside them, a float vector of 256 is a quantization map (one entry per code) and a float vector
# of one element per block of a power-of-two size from 32 to 4096 is a block scale (the same size for every scale of
# that state). A parameter that changed shape is still refused by its codes.
CODE_MAP_SIZE = 256
BLOCK_SIZES = tuple(2 ** k for k in range(5, 13))
NEWER_GROUP_FLAGS = frozenset(FLAGS_NEWER_THAN_OLD_CHECKPOINTS)  # a checkpoint from an older torch lacks these
_GROUP_IDS = ("params", "param_names")


def _fmt(shape) -> str:
    return str(tuple(shape))


def shape_mismatch(state: dict, param, current: dict | None = None, scalars=frozenset(), stacks=None) -> str:
    """Why ``state`` cannot belong to ``param`` ("" if it can). Every tensor in it must have the shape the
    current optimizer would give that key, compared whole (ndim included), never "some tensor fits":

    * a parameter-shaped key (anything not listed below) exactly the parameter's shape;
    * a scalar (``SCALAR_KEYS``: step, ASGD's eta and mu, NAdam's mu_product, ScaledAdam's param_rms and
      scale_exp_avg_sq) 0-dim or one element; Adafactor's ``row_var``/``col_var`` exactly the parameter's shape
      with a 1 at the reduced dim (-1 / -2); ScaledAdam's ``scale_grads`` one dim;
    * a key none of torch's or optbench's optimizers uses: if ``current`` (the optimizer's own state for this
      parameter) holds it, the parameter's shape where it has that, else its number of dims; if not, a 0-dim
      tensor is a scalar when the key is in ``scalars`` (0-dim for every parameter of the saved state), a tensor
      whose shape is the parameter's with dims dropped or kept as 1 is a factor of it (a third-party factored
      second moment: transformers' Adafactor's ``exp_avg_sq_row``, shape ``(n,)`` for ``(n, m)``), and anything
      else must have the parameter's shape; of a 0-dim parameter, a one-element vector fits such a key too (a
      library that keeps one for every parameter: bitsandbytes' ``unorm_vec``); a key in ``stacks`` (``saved_stacks``:
      ``k`` parameter-shaped buffers stacked, in every parameter's saved state) exactly ``(k, *parameter's shape)``
      (bitsandbytes' AdEMAMix keeps its two EMAs as ``state1`` of shape ``(2, *p.shape)``);
    * bitsandbytes' 8-bit quantization maps (``QUANTIZATION_MAP_KEYS``) their map's shape, and its block scales
      (``BLOCK_SCALE_KEYS``) one element per block of the parameter (a row of them per buffer where its codes are
      ``k`` buffers stacked: AdEMAMix8bit's two EMAs); in a state holding uint8 codes of the
      parameter's shape (8-bit block-wise state at its top level), a key none of these names that the optimizer does
      not hold a float vector of ``CODE_MAP_SIZE`` (a map) or of one element per block (``common_block_size``).

    Of a 0-dim parameter every 0-dim tensor fits. Non-tensor values (an int step) are not checked."""
    want = tuple(param.shape)
    codes = holds_8bit_codes(state, param)
    block = codes and common_block_size(state, param)
    for key, value in state.items():
        if not isinstance(value, torch.Tensor) or (value.dim() == 0 and param.dim() == 0):
            continue
        shape, ours = tuple(value.shape), current.get(key) if current else None
        if key in SCALAR_KEYS:
            ok, expect = value.numel() == 1 and value.dim() <= 1, "a scalar"
        elif key in FACTORED_KEYS:
            factored = FACTORED_KEYS[key](want) if param.dim() >= 2 else None
            ok, expect = shape == factored, _fmt(factored) if factored else "none (the parameter has fewer than 2 dims)"
        elif key in QUANTIZATION_MAP_KEYS:
            ok, expect = shape == QUANTIZATION_MAP_KEYS[key], f"{_fmt(QUANTIZATION_MAP_KEYS[key])}, a quantization map"
        elif key in BLOCK_SCALE_KEYS:
            blocks = (-(-param.numel() // BLOCK_SCALE_KEYS[key]),)
            k = (stacks or {}).get(key.replace("absmax", "state"))  # its codes k buffers stacked: a row of scales each
            ok = shape == blocks or (k is not None and shape == (k, *blocks))
            expect = (f"{_fmt(blocks)}, one scale per block of {BLOCK_SCALE_KEYS[key]} elements"
                      + (f", or {_fmt((k, *blocks))} for its {k} stacked buffers" if k else ""))
        elif key in PER_STEP_KEYS:
            ok, expect = value.dim() == PER_STEP_KEYS[key], f"{PER_STEP_KEYS[key]} dim"
        elif key not in PARAMETER_SHAPED_KEYS and isinstance(ours, torch.Tensor) and ours.shape != param.shape:
            ok, expect = value.dim() == ours.dim(), f"{ours.dim()} dims, as the optimizer's own"
        elif key not in PARAMETER_SHAPED_KEYS and ours is None and key in (stacks or {}):
            stacked = (stacks[key], *want)
            ok, expect = shape == stacked, f"{_fmt(stacked)}, {stacks[key]} parameter-shaped buffers stacked"
        elif key not in PARAMETER_SHAPED_KEYS and value.dim() == 0 and key in scalars and ours is None:
            ok, expect = True, ""
        elif key not in PARAMETER_SHAPED_KEYS and ours is None and 0 < value.dim() and _reduces(shape, want):
            ok, expect = True, ""  # a factor of the parameter's shape (transformers' Adafactor's exp_avg_sq_row)
        elif key not in PARAMETER_SHAPED_KEYS and ours is None and codes and value.dim() == 1 and shape != want:
            ok = value.is_floating_point() and (shape == (CODE_MAP_SIZE,) or block is not None)
            expect = (f"a float vector beside the state's 8-bit codes: ({CODE_MAP_SIZE},), a quantization map, or one "
                      f"scale per block of a size from {BLOCK_SIZES[0]} to {BLOCK_SIZES[-1]} shared by its scales"
                      + ("" if value.is_floating_point() else f" (it holds {value.dtype})"))
        elif key not in PARAMETER_SHAPED_KEYS and ours is None and param.dim() == 0 and shape == (1,):
            ok, expect = True, ""  # a one-element vector kept for every parameter (bitsandbytes' unorm_vec)
        else:
            ok, expect = shape == want, ""
        if not ok:
            saved = f"its saved state {key} has shape {_fmt(shape)}"
            return (f"{saved}, the parameter has {_fmt(want)}" if not expect
                    else f"{saved}, not {expect} (the parameter has {_fmt(want)})")
    return ""


def holds_8bit_codes(state: dict, param) -> bool:
    """Whether ``state`` holds uint8 codes of ``param``'s shape: 8-bit block-wise state kept at its top level."""
    want = tuple(param.shape)
    return any(isinstance(v, torch.Tensor) and v.dtype == torch.uint8 and tuple(v.shape) == want
               for v in state.values())


def common_block_size(state: dict, param) -> int | None:
    """The largest of ``BLOCK_SIZES`` that makes every float vector of ``state`` other than ``param``'s shape and a
    map's (``CODE_MAP_SIZE``) one scale per block of ``param``; None when no one size does."""
    want, n = tuple(param.shape), param.numel()
    lengths = {v.shape[0] for v in state.values() if isinstance(v, torch.Tensor) and v.dim() == 1
               and v.is_floating_point() and tuple(v.shape) not in (want, (CODE_MAP_SIZE,))}
    return next((b for b in reversed(BLOCK_SIZES) if all(length == -(-n // b) for length in lengths)), None)


def _reduces(shape: tuple, want: tuple) -> bool:
    """Whether ``shape`` is ``want`` reduced over some dims (dropped, or kept as 1), in order, and not ``want``."""
    if len(shape) > len(want) or shape == want:
        return False
    at = 0
    for size in want:
        if at < len(shape) and shape[at] in (size, 1):
            at += 1
    return at == len(shape)


def flattened(state, prefix: str = "") -> dict:
    """A nested state (``{"moments": {"m": t}}``) as one level, keys joined by '.' (``{"moments.m": t}``)."""
    out = {}
    for key, value in state.items():
        if isinstance(value, dict) and value:
            out.update(flattened(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}" if prefix else key] = value
    return out


def saved_scalars(states) -> frozenset:
    """The keys that are 0-dim tensors in every one of ``states`` holding them (a scalar of an optimizer
    ``shape_mismatch`` does not know); batched stacks left out."""
    seen: dict[str, bool] = {}
    for state in states:
        if isinstance(state, dict) and BATCH_NAMES not in state:
            for key, value in flattened(state).items():
                if isinstance(value, torch.Tensor):
                    seen[key] = seen.get(key, True) and value.dim() == 0
    return frozenset(k for k, scalar in seen.items() if scalar)


def saved_stacks(states) -> dict[str, int]:
    """The keys (none of torch's or optbench's optimizers uses) that hold ``k >= 2`` parameter-shaped buffers
    stacked: in every one of ``states`` holding them a tensor of at least one dim whose first is ``k``, the same
    ``k`` everywhere, and the rest of two or more shapes among the parameters (so the rest follows each parameter's
    shape, as ``shape_mismatch`` then requires of each); batched stacks left out."""
    firsts: dict[str, set] = {}
    rests: dict[str, set] = {}
    for state in states:
        if isinstance(state, dict) and BATCH_NAMES not in state:
            for key, value in flattened(state).items():
                if isinstance(value, torch.Tensor) and key not in PARAMETER_SHAPED_KEYS:
                    firsts.setdefault(key, set()).add(value.shape[0] if value.dim() >= 1 else None)
                    rests.setdefault(key, set()).add(tuple(value.shape[1:]))
    return {key: next(iter(k)) for key, k in firsts.items()
            if len(k) == 1 and None not in k and next(iter(k)) >= 2 and len(rests[key]) >= 2}


def _own_keys(state: dict) -> set:
    return {k for k, v in state.items() if k != BATCH_NAMES and not isinstance(v, dict)}


def check_state(name: str, state: dict, param, current: dict | None = None, scalars=frozenset(),
                stacks=None) -> None:
    """Raise StateDictNameError (one line, naming ``name`` and the key) if ``state`` cannot be ``param``'s: a
    tensor of the wrong shape (``shape_mismatch``), or, where the optimizer already holds state for it, keys of
    another optimizer (the saved state has keys the optimizer's lacks and lacks keys it has). Nested state is
    checked tensor by tensor (``flattened``); the caller leaves a group's bookkeeping out."""
    state, current = flattened(state), flattened(current) if current else current
    if current:
        extra, lacking = sorted(_own_keys(state) - _own_keys(current)), sorted(_own_keys(current) - _own_keys(state))
        if extra and lacking:
            raise StateDictNameError(f"{name}: its saved state is another optimizer's: it has {', '.join(extra)}, "
                                     f"which the optimizer's own state lacks, and lacks {', '.join(lacking)}")
    why = shape_mismatch(state, param, current, scalars, stacks)
    if why:
        raise StateDictNameError(f"{name} changed shape: {why}")


def refuse_foreign(optimizer, state_dict: dict, strict: bool) -> None:
    """Refuse another optimizer class's state (``check_same_optimizer``) and, under strict, state under ids no
    saved param group lists (``check_attributed``)."""
    if strict:
        check_attributed(state_dict)
    check_same_optimizer(optimizer, state_dict["param_groups"])


def state_checker(optimizer, saved_states) -> Callable[[str, dict, torch.Tensor], None]:
    """``check_state`` against ``optimizer``'s own state (``per_parameter_state``) and the saved states' scalars and
    stacks."""
    saved_states = list(saved_states)
    current, scalars, stacks = per_parameter_state(optimizer), saved_scalars(saved_states), saved_stacks(saved_states)
    return lambda name, state, param: check_state(name, state, param, current.get(param), scalars, stacks)


def check_attributed(state_dict: dict) -> None:
    """Under strict: refuse state under ids no saved param group lists (string ids, ids of another layout),
    which the loader cannot attribute to a named parameter."""
    listed = {pid for g in state_dict["param_groups"] for pid in g["params"]}
    stray = [k for k in state_dict["state"] if k not in listed]
    if stray:
        raise StateDictNameError(f"the state_dict holds state under ids no param group lists, which cannot be "
                                 f"attributed to a named parameter: {', '.join(map(repr, stray))}")


def check_same_optimizer(optimizer, saved_groups: list[dict]) -> None:
    """Refuse another optimizer class's param groups. A saved group is foreign when it has hyperparameters the
    optimizer neither takes (its ``defaults``) nor holds in its groups, AND lacks ones its ``defaults`` has that
    every torch version had. Either alone is not: an LR scheduler adds keys (initial_lr), an older torch's
    checkpoint lacks a newer flag (``NEWER_GROUP_FLAGS``). A private default (a leading ``_``) is never counted as
    lacking: a library's state_dict may drop them."""
    defaults = set(optimizer.defaults)
    known = defaults | {k for g in optimizer.param_groups for k in g}
    for i, group in enumerate(saved_groups):
        extra = sorted(k for k in group if k not in known and k not in _GROUP_IDS)
        lacking = sorted(k for k in defaults - set(group) - NEWER_GROUP_FLAGS
                         if not str(k).startswith("_"))  # a private key (heavyball's state_dict drops them)
        if extra and lacking:
            raise StateDictNameError(f"the state_dict is another optimizer's, not {type(optimizer).__name__}'s: its "
                                     f"param group {i} has {', '.join(extra)}, which {type(optimizer).__name__} does "
                                     f"not take, and lacks {', '.join(lacking)}")


def snapshot(optimizer) -> tuple:
    """What ``restore`` needs to put ``optimizer`` back as it is now: its attributes, and the contents of its state,
    groups and defaults (torch's loader replaces the first two; a subclass's ``__setstate__`` may raise after)."""
    return (dict(optimizer.__dict__), {p: (s, dict(s)) for p, s in optimizer.state.items()},
            [(g, dict(g)) for g in optimizer.param_groups], dict(optimizer.defaults))


def restore(optimizer, snap: tuple) -> None:
    attributes, state, groups, defaults = snap
    optimizer.__dict__.clear()
    optimizer.__dict__.update(attributes)
    optimizer.state.clear()
    for p, (own, content) in state.items():
        own.clear()
        own.update(content)
        optimizer.state[p] = own
    for group, content in groups:
        group.clear()
        group.update(content)
    optimizer.defaults.clear()
    optimizer.defaults.update(defaults)


def transactional_load(optimizer, state_dict: dict) -> None:
    """``optimizer.load_state_dict(state_dict)``; on any error the optimizer is put back as it was, and it raises."""
    before = snapshot(optimizer)
    try:
        optimizer.load_state_dict(state_dict)
    except BaseException:
        restore(optimizer, before)
        raise


def trial_load(optimizer, state_dict: dict) -> None:
    """Load ``state_dict`` into a detached copy of ``optimizer`` (its own groups, state and hooks; the same
    parameters), so that anything torch's loader or the class's ``__setstate__`` raises is raised before the
    optimizer itself is touched (``name_aware``: a load pre-hook cannot undo the load that follows it)."""
    probe = object.__new__(_probe_class(type(optimizer)))
    probe.__dict__.update(optimizer.__dict__)
    probe.__dict__.update(defaults=dict(optimizer.defaults), _optimizer_load_state_dict_pre_hooks=OrderedDict(),
                          _optimizer_load_state_dict_post_hooks=OrderedDict())
    try:
        type(optimizer).load_state_dict(probe, state_dict)
    finally:
        probe.__dict__.clear()  # it shared the optimizer's attributes: nothing of them goes with it


@lru_cache(maxsize=None)
def _probe_class(cls: type) -> type:
    """``cls`` without a ``__del__``: the probe shares the optimizer's attributes, and a class whose ``__del__`` frees a
    native object by an id it holds (DeepSpeed's CPU optimizers: ``destroy_adam(self.opt_id)``) would free the live
    optimizer's when the probe is collected (its next step then dereferences null)."""
    try:
        return type(cls.__name__, (cls,), {"__del__": lambda self: None, "__module__": cls.__module__,
                                           "__qualname__": cls.__qualname__})
    except Exception:  # a class that cannot be subclassed: the probe is one of its own
        return cls
