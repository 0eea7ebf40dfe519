"""``state``: how the candidate's optimizer state reads as the reference's, a mapping of

* ``keys``: the candidate's state key -> the reference's (default ``{}``);
* ``ignore``: state keys compared on neither side, after the key map (default ``[]``);
* ``step``: where the step count lives: ``param`` (the default), ``group`` (``group:<key>``: the count under another
  name in each param group), ``none`` (not kept: not compared);
* ``decode``: ``flat`` (the default), ``nested`` (``{"m": {"v": t}}`` reads as ``m.v``), or the dotted path of a
  function: one parameter's state -> a flat dict (``optbench.adapters.libraries.heavyball.flat``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from optbench.adapters.registry import CandidateSpecError, adapter_key, reject_unknown
from optbench.dotted import import_dotted
from optbench.state.validation import flattened

STATE_KEYS = {"keys", "ignore", "step", "decode"}
STEP_PLACES = ("param", "group", "none")  # "group:<key>" too
DECODERS = ("flat", "nested")  # or the dotted path of a function: state -> flat dict


def adapts(spec) -> bool:
    """Whether the spec reads the candidate's state otherwise than as it is."""
    return bool(spec.state_keys or spec.ignore or spec.step != "param" or spec.decode != "flat")


def skipped(spec) -> frozenset[str]:
    """Tensor names left out of every comparison, on both sides."""
    return frozenset(spec.ignore) | ({"step"} if spec.step == "none" else set())


def decoder(spec) -> Callable[[Mapping], dict]:
    if spec.decode == "flat":
        return dict
    if spec.decode == "nested":
        return flattened
    return import_dotted(spec.decode, what=f"{spec.source}: state.decode")


def read_adapted(spec, optimizer) -> None:
    """Make the harness read a just-built ``optimizer``'s state as the reference keeps it (``per_parameter_state``)."""
    if adapts(spec):
        optimizer.per_parameter_state = AdaptedState(optimizer, spec, decoder(spec))


def as_fields(state: dict) -> dict:
    return {"state_keys": state["keys"], "ignore": state["ignore"], "step": state["step"], "decode": state["decode"]}


@adapter_key("state", fields=as_fields, attach=read_adapted)
def parse(value, source: str) -> dict:
    state = value or {}
    reject_unknown(state, STATE_KEYS, f"{source}: state")
    step = str(state.get("step", "param"))
    if step not in STEP_PLACES and not step.startswith("group:"):
        raise CandidateSpecError(f"{source}: state.step={step}: one of {', '.join(STEP_PLACES)} or group:<key>")
    decode = str(state.get("decode", "flat"))
    if decode not in DECODERS and "." not in decode:
        raise CandidateSpecError(f"{source}: state.decode={decode}: flat, nested or a function's dotted path")
    return {"keys": {str(k): str(v) for k, v in (state.get("keys") or {}).items()},
            "ignore": tuple(str(k) for k in state.get("ignore") or ()), "step": step, "decode": decode}


class AdaptedState:
    """``per_parameter_state`` of an adapted candidate: each parameter's state decoded, its keys mapped and
    left out as the spec says, ``step`` taken from the parameter's group where the candidate keeps it there."""

    def __init__(self, optimizer, spec, decode: Callable[[Mapping], dict]):
        own = getattr(optimizer, "per_parameter_state", None)  # the class's own view first (a batched one's rows)
        self.inner = own if callable(own) else (lambda: optimizer.state)
        self.optimizer, self.spec, self.decode = optimizer, spec, decode
        self.group_step = spec.step.partition(":")[2] or "step" if spec.step.startswith("group") else None

    def __call__(self) -> dict:
        inner = self.inner()
        groups = {id(p): g for g in self.optimizer.param_groups for p in g["params"]}
        out = {}
        for param, state in inner.items():
            mapped = {self.spec.state_keys.get(str(k), str(k)): v for k, v in self.decode(state).items()}
            mapped = {k: v for k, v in mapped.items() if k not in self.spec.ignore}
            if not state:  # an entry made by reading optimizer.state[p] (schedulefree's train()): no state yet
                continue
            group = groups.get(id(param))
            if self.group_step and group is not None and self.group_step in group:
                mapped["step"] = group[self.group_step]
            out[param] = mapped
        return out
