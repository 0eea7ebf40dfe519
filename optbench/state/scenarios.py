"""The state_dict round-trips users meet, as scenarios: what changes between saving an optimizer and
loading its state_dict (order, grouping, the set of parameters, their names, shapes, implementation,
device, dtype, the file's format or age), and what a by-name load must then do (continue the run, or
refuse with an error naming the problem and, where there is one, continue once the user says how).

A ``Layout`` says how one side builds its optimizer over the workload's named parameters; the check
(optbench/checks/roundtrip.py) runs each ``Scenario`` for every implementation of a suite.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from optbench.hyperparameters import FLAGS_NEWER_THAN_OLD_CHECKPOINTS, IMPLEMENTATION_FLAGS, for_torch
from optbench.state.by_name import with_param_names
from optbench.state.formats import as_torch, to_flat, to_name_keyed
from optbench.suite.spec import HparamSet

# Which parameters a partial side lacks: every third FQN (several groups, ranks and kinds).
PARTIAL = slice(0, None, 3)


@dataclass(frozen=True)
class Layout:
    """How one side builds its optimizer: which FQNs it holds, in what order and grouping, under what names."""

    partial: bool = False  # lacks the PARTIAL FQNs (a frozen layer; for the other side, a new one)
    order: str = "same"  # same | reversed (within groups) | shuffled (groups reversed, names shuffled within)
    # | same_shapes_reversed (parameters of one shape trade places: every position keeps its shape)
    grouping: str = "suite"  # suite (the hparam set's groups) | each (one group per parameter, same options)
    prefix: str = ""  # names recorded as prefix + FQN (DDP's "module.", torch.compile's "_orig_mod.")
    named: bool = True  # False: built from bare tensors, as model.parameters() gives them
    grown: bool = False  # the first matrix has one more row than at save time
    from_dict: bool = False  # built by optbench.optimizer_from_dict from Dict[str, Tensor] groups (the RFC's form)

    def fqns(self, names: list[str]) -> list[str]:
        dropped = set(names[PARTIAL]) if self.partial else set()
        return [n for n in names if n not in dropped]

    def groups(self, hset: HparamSet, params: dict[str, torch.Tensor], seed: int) -> list[dict]:
        """torch param groups over ``params`` (already this side's FQNs), laid out as this side says."""
        names = list(params)
        if self.order == "reversed":
            names = names[::-1]
        elif self.order == "same_shapes_reversed":
            group_of = {n: gi for gi, group in enumerate(hset.assign(names)) for n in group}
            by_shape: dict[tuple, list[str]] = {}
            for n in names:
                by_shape.setdefault((tuple(params[n].shape), group_of[n]), []).append(n)
            names = [by_shape[(tuple(params[n].shape), group_of[n])].pop() for n in names]
        elif self.order == "shuffled":
            names = [names[i] for i in np.random.default_rng(seed).permutation(len(names))]
        if self.grouping == "each":
            options = {n: opts for group, opts in zip(hset.assign(names), hset.group_options()) for n in group}
            spec = [([n], for_torch(options[n])) for n in names]
        else:
            overrides = [{}] + [g.options for g in hset.groups]
            spec = [(group, for_torch(opts)) for group, opts in zip(hset.assign(names), overrides) if group]
        if self.order == "shuffled":
            spec = spec[::-1]
        if self.from_dict:
            return [{"params": {self.prefix + n: params[n] for n in group}, **opts} for group, opts in spec]
        entry = (lambda n: (self.prefix + n, params[n])) if self.named else (lambda n: params[n])
        return [{"params": [entry(n) for n in group], **opts} for group, opts in spec]


def _without_names(state_dict: dict) -> dict:
    return {"state": state_dict["state"],
            "param_groups": [{k: v for k, v in g.items() if k != "param_names"} for g in state_dict["param_groups"]]}


def _without_new_flags(state_dict: dict) -> dict:
    """As an older torch saved it: no implementation flags, and no behaviour flag it could not have set."""
    def old(key, value) -> bool:
        return key in FLAGS_NEWER_THAN_OLD_CHECKPOINTS and (key in IMPLEMENTATION_FLAGS or not value)
    return {"state": state_dict["state"],
            "param_groups": [{k: v for k, v in g.items() if not old(k, v)} for g in state_dict["param_groups"]]}


def _reread(value):
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _via_name_keyed(state_dict: dict) -> dict:
    return as_torch(_reread(to_name_keyed(state_dict)))


def _via_flat(state_dict: dict) -> dict:
    return as_torch(_reread(to_flat(state_dict)))


@dataclass(frozen=True)
class Recovery:
    """What the user does after a refusal, and the load that must then work."""

    how: str
    strict: bool = True
    rename: object = None
    names: bool = False  # attach the saving order's names (optbench.with_param_names)

    def apply(self, state_dict: dict, saved_names: list[str]) -> dict:
        return with_param_names(state_dict, saved_names) if self.names else state_dict


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    save: Layout = Layout()
    load: Layout = Layout()
    rename: object = None  # load_state_dict_by_name's rename
    transform: Callable[[dict], dict] | None = None  # applied to the loaded file before loading
    refuses: str = ""  # the by-name load must raise StateDictNameError with this in its message
    recovery: Recovery | None = None  # and then this load must continue the run
    through_hook: bool = False  # load with optimizer.load_state_dict after optbench.name_aware
    save_impl: str = ""  # "" the case's own; "previous": the previous one in IMPLEMENTATION_CHAIN
    devices: tuple[str, str] | None = None  # (save, load) device types; None: the run's device
    load_dtype: str = ""  # "" the case's dtype
    reorders: bool = field(default=False)  # LBFGS's flat state cannot follow: by name it must refuse
    # "into": saved by the case's (quantized) candidate, loaded into its library's full-precision class; "from": the
    # other way. Either continues as the saving class's run (the state kept as saved) or the load refuses.
    counterpart: str = ""

    @property
    def exact(self) -> bool:
        """Bit for bit against the uninterrupted run (same implementation, device and dtype). Not a superset: its
        new parameters' expected values come from an optimizer of their own, and an implementation that steps a
        group's tensors together (foreach, fused, a library's kernel) may round them 1-2 ulp otherwise: at
        tolerance."""
        return not (self.save_impl or self.devices or self.load_dtype or self.save.partial or self.counterpart)


SHAPE_REFUSAL = "changed shape"  # what the by-name load says refusing a state tensor of another shape
IMPLEMENTATION_CHAIN = ("for-loop", "foreach", "fused", "compiled")

SCENARIOS: tuple[Scenario, ...] = (
    Scenario("same_order", "saved and loaded with the same parameters, order and groups"),
    Scenario("reversed", "loaded with the parameters in reverse order within each group",
             load=Layout(order="reversed"), reorders=True),
    Scenario("same_shapes_reordered", "loaded with parameters of equal shape in reverse order (each position "
             "keeps its shape, as when a refactor lists q_proj/k_proj/v_proj differently)",
             load=Layout(order="same_shapes_reversed"), reorders=True),
    Scenario("shuffled_across_groups", "loaded with the groups in reverse order and the parameters shuffled",
             load=Layout(order="shuffled"), reorders=True),
    Scenario("regrouped", "loaded with one param group per parameter (same options): hparams follow the new groups",
             load=Layout(grouping="each"), reorders=True),
    Scenario("subset", "loaded without every third parameter (frozen): strict refuses naming them, "
             "strict=False drops their state", load=Layout(partial=True), refuses="unexpected in the state_dict",
             recovery=Recovery("strict=False", strict=False), reorders=True),
    Scenario("superset", "saved without every third parameter (new layers): strict refuses naming them, "
             "strict=False starts them fresh", save=Layout(partial=True), refuses="missing from the state_dict",
             recovery=Recovery("strict=False", strict=False), reorders=True),
    Scenario("renamed_mapping", "loaded under new names (backbone.*), renamed by a mapping",
             load=Layout(prefix="backbone."), rename="mapping"),
    Scenario("ddp_prefix", "saved from a DDP-wrapped model (module.*), loaded unwrapped",
             save=Layout(prefix="module."), refuses="unexpected in the state_dict",
             recovery=Recovery("rename=lambda n: n.removeprefix('module.')",
                               rename=lambda n: n.removeprefix("module."))),
    Scenario("compile_prefix", "loaded into a torch.compile'd model's names (_orig_mod.*)",
             load=Layout(prefix="_orig_mod."), rename=lambda n: "_orig_mod." + n),
    Scenario("shape_changed", "loaded with the first matrix grown by one row", load=Layout(grown=True),
             refuses=SHAPE_REFUSAL),
    Scenario("cross_implementation", "saved by the previous implementation of for-loop, foreach, fused, compiled "
             "(for-loop: by foreach)", save_impl="previous"),
    Scenario("cuda_to_cpu", "saved on CUDA, loaded on CPU", devices=("cuda", "cpu")),
    Scenario("cpu_to_cuda", "saved on CPU, loaded on CUDA", devices=("cpu", "cuda")),
    Scenario("float32_to_bfloat16", "float32 parameters' state loaded for bfloat16 parameters", load_dtype="bfloat16"),
    Scenario("unnamed_saved", "saved by an optimizer built from model.parameters() (no param_names)",
             transform=_without_names, refuses="no 'param_names'",
             recovery=Recovery("optbench.with_param_names(state_dict, saving order's names)", names=True)),
    Scenario("unnamed_optimizer", "a named state_dict loaded into an optimizer built from model.parameters()",
             load=Layout(named=False), refuses="no 'param_names'"),
    Scenario("missing_flags", "a state_dict from before " + ", ".join(FLAGS_NEWER_THAN_OLD_CHECKPOINTS)
             + " existed (keys absent)", transform=_without_new_flags),
    Scenario("rfc_name_keyed", "reversed order, the file in the RFC's name-keyed form (state keyed by FQN)",
             load=Layout(order="reversed"), transform=_via_name_keyed, reorders=True),
    Scenario("dcp_flat", "reversed order, the file in DCP's flat form (state.{fqn}.{key}, param_groups.{fqn}.{key})",
             load=Layout(order="reversed"), transform=_via_flat, reorders=True),
    Scenario("dict_adapter", "both sides built from Dict[str, Tensor] groups by optbench.optimizer_from_dict "
             "(torch rejects a dict), loaded in reverse order", save=Layout(from_dict=True),
             load=Layout(from_dict=True, order="reversed"), reorders=True),
    Scenario("name_aware", "reversed order, loaded by optimizer.load_state_dict after optbench.name_aware()",
             load=Layout(order="reversed"), through_hook=True, reorders=True),
    # only for a candidate whose spec names its library's full-precision class (quantized.full_precision)
    Scenario("into_full_precision", "saved by the candidate (quantized state), loaded into its library's "
             "full-precision class: it continues as the saved state's class would, or the load refuses",
             counterpart="into"),
    Scenario("from_full_precision", "saved by its library's full-precision class, loaded into the candidate: it "
             "continues as the saved state's class would, or the load refuses", counterpart="from"),
)

BY_NAME = {s.name: s for s in SCENARIOS}
