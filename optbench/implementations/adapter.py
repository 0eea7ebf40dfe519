"""The implementation interface: how the harness builds and steps an optimizer under test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache, partial

import torch

from optbench.adapters import group_hparams
from optbench.adapters.dtypes import unsupported as undeclared_dtype
from optbench.adapters.group_options import carried
from optbench.hyperparameters import takes
from optbench.rows import first_words

from .graphed import GraphedStep

ParamGroups = list[dict]  # torch param groups whose "params" are (name, tensor) pairs


class ConventionDiffers(TypeError):
    """A hyperparameter set asks a candidate for another value of an option its class fixes by convention (a
    candidate spec's ``conventions``): it does not take the set."""


@lru_cache(maxsize=None)
def dynamo_disables(optimizer_class: type) -> bool:
    """Whether torch._dynamo refuses to trace the class's step (LBFGS, SparseAdam): its one-time setup, run by the
    first torch.compile of a process, wraps those steps in torch.compiler.disable. The setup is run alone where
    torch names it (``TorchPatcher.patch``, which every torch.compile runs first): a torch.compile call also imports
    inductor, 2.4 s of a process that may never compile."""
    from torch._dynamo import eval_frame

    patcher = getattr(eval_frame, "TorchPatcher", None)
    if patcher is not None and callable(getattr(patcher, "patch", None)):
        patcher.patch()
    else:  # another torch: the public way
        torch.compile(lambda x: x)  # builds nothing until called; runs the setup
    return bool(getattr(optimizer_class.step, "_torchdynamo_disable", False))


@dataclass
class Stepper:
    """A built optimizer and the callable that performs one step (compiled, graphed or not).

    ``params`` names the tensors the optimizer steps when they are not the model's own (float32
    master copies, ``implementations.master_weights``), and ``precision`` the dtype those are judged in;
    None for both means the model's parameters at the run's dtype.
    """

    optimizer: torch.optim.Optimizer
    step: Callable[..., object]
    params: dict[str, torch.Tensor] | None = None
    precision: torch.dtype | None = None


@dataclass(frozen=True)
class Implementation:
    """A named way to build an optimizer from named param groups and hyperparameters.

    ``build(groups, options)`` returns a Stepper; ``available(device, dtype)`` says why a torch
    variant cannot run there (a one-line reason) or None when it can. A candidate is never probed:
    whatever it raises is reported as an error of that case. ``needs_cuda`` variants (capturable,
    graphed) are not probed off CUDA: they are "needs CUDA" there. ``checks`` limits the checks a
    variant takes part in (None: all).
    """

    name: str
    optimizer_class: type
    flags: dict = field(default_factory=dict)
    compiled: bool = False
    is_candidate: bool = False
    extra_kwargs: dict = field(default_factory=dict)  # a candidate's candidate_kwargs
    graphed: bool = False  # the step captured in a CUDA graph and replayed (implementations.graphed)
    needs_cuda: bool = False
    checks: tuple[str, ...] | None = None
    named: bool = True  # False: built from plain tensors, for a class that cannot take named parameters
    inherits_deviations: bool = True  # the suite's declared deviations cover it (a candidate: see Suite.deviations_for)
    base_kwargs: dict = field(default_factory=dict)  # a candidate's reference defaults and fixed arguments
    spec: object = None  # a candidate's CandidateSpec (optbench.adapters.spec)

    def reference_options(self, suite_options: dict) -> dict:
        """The reference-only options a case of this implementation is judged with: the suite's, then a
        candidate's conventions (``CandidateSpec.conventions``)."""
        return {**suite_options, **(self.spec.conventions if self.spec is not None else {})}

    def spelled(self, options: dict) -> dict:
        """``options`` (the reference's names) as this implementation's constructor spells them."""
        return self.spec.renamed(options) if self.spec is not None else dict(options)

    def options_not_taken(self, options) -> list[str]:
        """The reference's options (names) this implementation's constructor does not take, renames applied; an
        option the candidate's class fixes by convention counts as taken (``build`` checks its value)."""
        spelled = self.spec.arguments if self.spec is not None else (lambda o: [str(o)])
        fixed_by_class = self.spec.conventions if self.spec is not None else {}
        ignored = self.spec.not_taken if self.spec is not None else ()  # kept by **kwargs, never acted on
        return sorted(o for o in options if o in ignored or o not in fixed_by_class
                      and not all(takes(self.optimizer_class, a) for a in spelled(o)))

    def not_taking(self, missing: list[str]) -> str:
        """Why it does not take the options ``missing`` (``options_not_taken``'s), in a clause."""
        ignored = [o for o in missing if self.spec is not None and o in self.spec.not_taken]
        lacking = [o for o in missing if o not in ignored]
        return "; ".join([f"its constructor takes no {', '.join(lacking)}"] * bool(lacking)
                         + [f"it keeps {', '.join(ignored)} without acting on it (candidate spec: not_taken)"]
                         * bool(ignored))

    def differs_from_conventions(self, options: dict) -> str:
        """Why ``options`` ask the candidate's class for another value than one it fixes by convention ("" where
        they do not): ``build`` raises ``ConventionDiffers`` with it."""
        try:
            self._conventional(dict(options))
        except ConventionDiffers as exc:
            return str(exc)
        return ""

    def _conventional(self, options: dict) -> dict:
        """``options`` less those the candidate's class fixes by convention and its constructor does not take, each
        equal to that convention's value (else ``ConventionDiffers``)."""
        if self.spec is None or not self.spec.conventions:
            return options
        out, cls = dict(options), self.optimizer_class
        while isinstance(cls, partial) and cls.args:  # built through a wrapper (optbench.optimizer_from_dict)
            cls = cls.args[0]
        for option, value in self.spec.conventions.items():
            if option in out and not all(takes(cls, a) for a in self.spec.arguments(option)):
                if out.pop(option) != value:
                    raise ConventionDiffers(f"unexpected keyword argument {option!r}: its constructor takes no "
                                            f"{option}, its class always does {option}={value!r} (conventions)")
        return out

    @property
    def skipped_state(self) -> frozenset[str]:
        """State tensor names compared on neither side (a candidate spec's ``ignore``, and ``step: none``)."""
        return self.spec.skipped_state() if self.spec is not None else frozenset()


    def build(self, groups: ParamGroups, options: dict | None = None) -> Stepper:
        if not self.named:  # the names stay with the harness (it pairs tensors by identity); torch records none
            groups = [{**g, "params": [p[1] if isinstance(p, tuple) else p for p in g["params"]]} for g in groups]
        if self.spec is not None:
            groups = [self.spec.renamed(self._conventional(carried(self.spec.group_options, g)))
                      for g in groups]  # "params" is never renamed
        options = self._conventional(options or {})
        kwargs = {**self.base_kwargs, **self.spelled(options), **self.extra_kwargs, **self.flags}
        kwargs, groups = group_hparams.into_groups(group_hparams.names_of(self.spec), kwargs, groups)
        if self.spec is not None:
            kwargs = self.spec.resolved(kwargs, groups)  # param.dtype: the parameters' own
        if "parameters_names" not in kwargs and takes(self.optimizer_class, "parameters_names", through_kwargs=False):
            named = all(isinstance(p, tuple) for g in groups for p in g["params"])
            if named:  # icefall's ScaledAdam: the names per group, List[List[str]], beside the named params
                kwargs["parameters_names"] = [[n for n, _ in g["params"]] for g in groups]
        optimizer = self.optimizer_class(groups, **kwargs)
        if self.spec is not None:
            self.spec.attach(optimizer)
        step = optimizer.step
        if self.compiled:
            torch._dynamo.reset()  # a fresh cache per build: past its recompile limit dynamo runs eager
            step = torch.compile(optimizer.step)
        if self.graphed:
            step = GraphedStep(optimizer)
        return Stepper(optimizer, step)

    def available(self, device: torch.device, dtype: torch.dtype) -> str | None:
        if self.is_candidate:
            return undeclared_dtype(self.spec, dtype) or None
        if self.compiled and dynamo_disables(self.optimizer_class):
            return (f"torch.compile does not compile {self.optimizer_class.__name__}.step: torch._dynamo disables it "
                    "(it runs eagerly; before dynamo's setup the first build in a process was traced, later ones "
                    "not, so a compiled variant would be two implementations)")
        if self.needs_cuda and device.type != "cuda":
            what = "a CUDA graph captures the step" if self.graphed else "torch steps capturable=True only on CUDA"
            return f"needs CUDA: {what} (device is {device.type})"
        shape = (2, 2) if self.optimizer_class is getattr(torch.optim, "Muon", None) else (2,)
        probe = torch.nn.Parameter(torch.zeros(shape, device=device, dtype=dtype))
        probe.grad = (torch.zeros_like(probe).to_sparse() if self.optimizer_class is torch.optim.SparseAdam
                      else torch.zeros_like(probe))
        try:
            optimizer = self.optimizer_class([probe], **self.flags)
            if self.optimizer_class is torch.optim.LBFGS:
                optimizer.step(lambda: (probe * probe).sum())
            else:
                optimizer.step()  # some check device/dtype only at step
        except (RuntimeError, ValueError, TypeError) as exc:
            return f"{type(exc).__name__}: {first_words(str(exc))}"
        return None
