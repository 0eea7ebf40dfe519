"""Parity inside a user's own training loop: ``optbench.watch(optimizer)``.

Step hooks (``Optimizer.register_step_pre_hook`` / ``register_step_post_hook``) bracket every real
step: before it, the watched parameters, their state and their actual gradients are copied to float64;
after it, the float64 reference takes the same step from the optimizer's own pre-step state and the
two are compared as the one-step gate compares them (``optbench.numerics.one_step``: the update in eps of its
own magnitude, each state tensor in eps of the dtype, the reference's rounding envelope allowed).
Restarting from the optimizer's state each step keeps the tolerance tight however long training runs.

Every parameter is watched by default. To bound the cost, every ``every``-th step is checked, and a tensor of more
than ``max_numel`` elements in full on every ``large_every``-th checked step (the first step checks all of them);
``max_tensors`` watches a seeded choice of that many parameters instead of all, and says at attach time (a
warning on the ``optbench.watch`` logger) how many it leaves out. Steps are numbered by the optimizer's own step
count where it keeps one (``state["step"]``: a watch attached after loading a checkpoint names the optimizer's
step), else counted from attach. The first divergence is kept by FQN (``param_names`` from
``model.named_parameters()``, or a ``names`` mapping) and logged as a warning when found; ``strict=True`` raises
``Divergence`` at it instead. A candidate spec (``adapter=``, or the one a built-in suite's ``candidates:`` hold for
the class) reads the class's options and state as the reference's (``optbench.adapters.live``), and an option a
group sets that the reference does not model is named at attach. Closure-driven optimizers (LBFGS) are not
supported.
"""

from __future__ import annotations

import logging
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import torch

from optbench.adapters import live
from optbench.hyperparameters import reference_value
from optbench.numerics.one_step import OneStep
from optbench.numerics.recording import as_array
from optbench.reference import load_reference
from optbench.reference.contract import kind_of
from optbench.state.batched import per_parameter_state
from optbench.workloads import reference_gradient

SKIP_KEYS = ("params", "param_names")
LOG = logging.getLogger("optbench.watch")  # what is left out at attach, a divergence when found


class Divergence(AssertionError):
    """An optimizer step departed from its reference past the one-step tolerance."""


@dataclass(frozen=True)
class Finding:
    step: int
    fqn: str
    tensor: str
    err_eps: float
    tol_eps: float

    def __str__(self) -> str:
        return (f"step {self.step}: {self.fqn} {self.tensor} is {self.err_eps:.3g} eps from the reference "
                f"(tolerance {self.tol_eps:g})")


_HOOKED_STEP = torch.optim.Optimizer.profile_hook_step(lambda self: None).__code__  # torch's hook-running wrapper


def _nested_step(optimizer: torch.optim.Optimizer) -> bool:
    """Whether this step runs inside another step of the same optimizer: a subclass's step calling
    super().step(), where torch runs the hooks around both; only the outermost is the user's step. Read off
    the call stack, so a step that raised (its post hooks never run) leaves nothing behind."""
    frame, seen = sys._getframe(1), 0
    while frame is not None:
        if frame.f_code is _HOOKED_STEP and frame.f_locals.get("self") is optimizer:
            seen += 1
            if seen > 1:
                return True
        frame = frame.f_back
    return False


@dataclass
class Watch:
    """The hooks and what they found; ``remove()`` detaches them."""

    optimizer: torch.optim.Optimizer
    reference: ModuleType
    watched: dict[str, torch.Tensor]
    every: int = 1
    strict: bool = False
    hparams: dict | Callable[[dict], dict] | None = None  # the reference's options per group (see ``watch``)
    spec: object = None  # a candidate spec (optbench.adapters.live): the class's options and state as the reference's
    max_numel: int | None = None  # larger tensors are checked on every large_every-th checked step only
    large_every: int = 1
    steps_checked: int = 0
    worst: dict[tuple[str, str], float] = field(default_factory=dict)
    first_divergence: Finding | None = None
    _step: int = 0
    _before: dict | None = None
    _handles: list = field(default_factory=list)

    def __post_init__(self):
        self._reader = live.state_reader(self.spec, self.optimizer)  # once, at attach: each step reads through it
        self._left_out = live.left_out(self.spec)

    def _states(self) -> dict:
        """Each parameter's state as the reference keeps it (through the spec), keys it leaves out removed."""
        states = self._reader() if self._reader is not None else per_parameter_state(self.optimizer)
        out = self._left_out
        return {p: {k: v for k, v in s.items() if k not in out} for p, s in states.items()} if out else states

    def _groups(self) -> dict[str, dict]:
        ids = {id(p): n for n, p in self.watched.items()}
        return {ids[id(p)]: g for g in self.optimizer.param_groups for p in g["params"] if id(p) in ids}

    def _pre(self, optimizer, args, kwargs) -> None:
        if _nested_step(optimizer):
            return
        self._step += 1
        if (self._step - 1) % self.every:
            self._before = None
            return
        with_large = self.max_numel is None or (self._step - 1) % (self.every * self.large_every) == 0
        live = {n: p for n, p in self.watched.items()
                if p.grad is not None and (with_large or p.numel() <= self.max_numel)}
        before = {(n, "param"): as_array(p) for n, p in live.items()}
        states = self._states()  # once: a batched optimizer builds its views per call
        before |= {(n, k): a for n, p in live.items() for k, v in states.get(p, {}).items()
                   if (a := as_array(v)) is not None}
        self._before = (before, {n: reference_gradient(p.grad) for n, p in live.items()})

    def _post(self, optimizer, args, kwargs) -> None:
        if _nested_step(optimizer) or self._before is None:
            return
        before, grads = self._before
        after = {(n, "param"): as_array(p) for n, p in self.watched.items() if n in grads}
        states = self._states()
        after |= {(n, k): a for n in grads for k, v in states.get(self.watched[n], {}).items()
                  if (a := as_array(v)) is not None}
        groups = self._groups()
        number = _own_step(states, [self.watched[n] for n in grads]) or self._step
        for dtype in {self.watched[n].dtype for n in grads}:
            names = [n for n in grads if self.watched[n].dtype == dtype]
            hp = {n: _hyperparameters(groups[n], self.hparams, dtype, self.spec) for n in names}
            gate = OneStep(self.reference, hp, dtype)
            gate.record(number, before, after, {n: grads[n] for n in names}, {})
            for step, fqn, tensor, err, tol in gate.rows:
                self.worst[(fqn, tensor)] = max(self.worst.get((fqn, tensor), 0.0), err)
                if not err <= tol and self.first_divergence is None:  # NaN diverges too
                    self.first_divergence = Finding(step, fqn, tensor, err, tol)
                    if not self.strict:
                        LOG.warning("optbench.watch: %s", self.first_divergence)
        self.steps_checked += 1
        if self.strict and self.first_divergence is not None:
            raise Divergence(str(self.first_divergence))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def summary(self) -> str:
        names = list(self.watched)
        shown = ", ".join(names[:6]) + (f", ... ({len(names) - 6} more)" if len(names) > 6 else "")
        if not self.steps_checked or not names:
            return (f"optbench.watch: nothing checked ({self.steps_checked} steps over {len(names)} tensors): "
                    "no verdict")
        verdict = f"first divergence at {self.first_divergence}" if self.first_divergence else "no divergence"
        return f"optbench.watch: {self.steps_checked} steps checked over {len(names)} tensors ({shown}): {verdict}"


def _own_step(states: dict, params: list) -> int | None:
    """The optimizer's own step count after this step (``state["step"]`` of the first parameter that keeps one)."""
    for p in params:
        step = states.get(p, {}).get("step")
        if step is not None:
            try:
                return int(float(step))
            except (TypeError, ValueError, RuntimeError):
                return None
    return None


def _names(optimizer: torch.optim.Optimizer, names) -> dict[str, torch.Tensor]:
    by_id = {id(p): n for n, p in (names.items() if isinstance(names, dict) else names or ())}
    out = {}
    for g, group in enumerate(optimizer.param_groups):
        recorded = group.get("param_names") or [None] * len(group["params"])
        for i, (p, name) in enumerate(zip(group["params"], recorded)):
            out[by_id.get(id(p)) or name or f"param_groups.{g}.params.{i}"] = p
    return out


def torch_optimizer_class(cls: type) -> type | None:
    """The torch.optim optimizer ``cls`` is or subclasses (None for any other class)."""
    return next((c for c in cls.__mro__
                 if c is getattr(torch.optim, c.__name__, None) and c is not torch.optim.Optimizer), None)


def _reference_module(optimizer: torch.optim.Optimizer, reference: str | ModuleType | None) -> ModuleType:
    """The reference module: the one given (a name, a dotted path or the module), else, for torch.optim's
    optimizers and their subclasses only, the built-in one named after the torch class."""
    cls = type(optimizer)
    if reference is None:
        torch_class = torch_optimizer_class(cls)
        if torch_class is None:  # a third-party class: its name says nothing of its algorithm
            raise ValueError(f"optbench.watch: {cls.__module__}.{cls.__qualname__} is not a torch.optim optimizer "
                             "or a subclass of one, so no reference is assumed: pass reference= (a built-in "
                             "name from 'optbench list', a dotted path to a module with init() and update(), or "
                             "the module itself)")
        reference = torch_class.__name__.lower().replace("sparseadam", "sparse_adam")
    if not isinstance(reference, str):
        return reference
    try:
        return load_reference(reference)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"optbench.watch: reference {reference!r} cannot be loaded ({exc}): pass a built-in name "
                         "from 'optbench list' or a dotted path importable from here") from None


def _hyperparameters(group: dict, hparams, dtype: torch.dtype, spec=None) -> dict:
    """What the reference gets for a param group: the group's options (Tensors as numbers) read through the
    candidate spec, then ``hparams`` (a dict laid over them, or a function of the group returning the reference's
    options), and dtype_eps."""
    hp = live.reference_options(spec, {k: reference_value(v) for k, v in group.items() if k not in SKIP_KEYS})
    if callable(hparams):
        hp = {k: reference_value(v) for k, v in hparams(dict(group)).items()}
    elif hparams:
        hp |= {k: reference_value(v) for k, v in hparams.items()}
    return hp | {"dtype_eps": torch.finfo(dtype).eps}


def _preflight(module: ModuleType, optimizer: torch.optim.Optimizer, hparams, spec=None) -> None:
    """Take one reference step per param group on a 1-element array, so that a reference needing an option
    the group does not hold fails here, in one line, not inside the training loop's ``step()``; an option a group
    sets that the reference never reads is named (a warning): its steps are judged as the reference's without it."""
    defaults = live.default_options(type(optimizer))
    for g, group in enumerate(optimizer.param_groups):
        dtype = group["params"][0].dtype if group["params"] else torch.float32
        hp = _hyperparameters(group, hparams, dtype if dtype.is_floating_point else torch.float32, spec)
        x = np.ones(1)
        try:
            module.update(x, x, module.init(x, hp), hp)
            if unread := live.unmodelled(module, hp, defaults):
                LOG.warning("optbench.watch: param group %d sets %s, which reference %r does not model (its steps "
                            "do not change with them): they are judged as the reference's without them", g,
                            ", ".join(f"{k}={hp[k]!r}" for k in unread), module.__name__.rsplit(".", 1)[-1])
        except KeyError as exc:
            held = ", ".join(k for k in group if k not in SKIP_KEYS)
            raise ValueError(f"optbench.watch: reference {module.__name__!r} needs option {exc.args[0]!r}, which "
                             f"param group {g} does not hold (it holds {held}): pass hparams= (a dict of the "
                             "reference's options, or a function of the group returning them)") from None


def _listed(cls: type) -> tuple[str, object] | tuple[None, None]:
    """The reference and the candidate spec of the built-in suite whose ``candidates:`` adapt ``cls``
    (pytorch-optimizer's Lion: suite lion's), or (None, None); a class two suites adapt names neither."""
    from optbench.dotted import import_dotted
    from optbench.suite.catalog import suite_by_name, suite_names

    found = []
    for name in suite_names():
        try:
            suite = suite_by_name(name)
        except Exception:  # a meta-suite (all, smoke): no candidates of its own
            continue
        for spec in suite.candidates:
            if spec.cls.rsplit(".", 1)[-1] == cls.__name__:
                try:
                    listed = import_dotted(spec.cls, what="a suite's candidate")
                except Exception:
                    continue
                if listed is cls:
                    found.append((suite.reference_name, spec))
    return found[0] if len(found) == 1 else (None, None)


def watch(optimizer: torch.optim.Optimizer, reference: str | ModuleType | None = None, *, names=None,
          max_tensors: int | None = None, max_numel: int | None = 1 << 18, large_every: int = 10, every: int = 1,
          strict: bool = False, seed: int = 0, hparams: dict | Callable[[dict], dict] | None = None,
          adapter=None) -> Watch:
    """Check every ``every``-th real step of ``optimizer`` against its float64 reference; see the module
    docstring. ``reference`` defaults, for torch.optim's classes and their subclasses only, to the built-in
    reference of the torch class (``adamw`` for AdamW, ``sparse_adam`` for SparseAdam); any other class must
    name one, unless a built-in suite's ``candidates:`` adapt it (pytorch-optimizer's Lion: the lion reference, with
    that adapter). ``adapter`` is a candidate spec (a ``CandidateSpec`` or a spec file's path, docs/candidates.md):
    the class's options and state read as the reference's, as ``candidate=`` reads them. ``hparams`` maps a param
    group's options to the reference's (a dict laid over them, or a function of the group) where a third-party
    class spells them otherwise."""
    spec = live.loaded(adapter)
    if reference is None and spec is None and torch_optimizer_class(type(optimizer)) is None:
        reference, spec = _listed(type(optimizer))
    module = _reference_module(optimizer, reference)
    if kind_of(module) != "gradient":
        raise ValueError("optbench.watch checks one tensor's step at a time: a closure-driven optimizer (LBFGS) or "
                         "one whose step couples a group's tensors (ScaledAdam's clipping) is not supported")
    if every < 1 or large_every < 1 or (max_tensors is not None and max_tensors < 1):
        raise ValueError("every, large_every and max_tensors must be at least 1")
    _preflight(module, optimizer, hparams, spec)
    candidates = list(_names(optimizer, names).items())
    if not candidates:
        LOG.warning("optbench.watch: the optimizer holds no parameters: nothing will be checked")
    count = len(candidates) if max_tensors is None else min(max_tensors, len(candidates))
    chosen = sorted(random.Random(seed).sample(range(len(candidates)), count))
    if count < len(candidates):
        left = [candidates[i][0] for i in range(len(candidates)) if i not in set(chosen)]
        LOG.warning("optbench.watch: max_tensors=%d leaves %d of %d parameters unwatched (%s%s)", max_tensors,
                    len(left), len(candidates), ", ".join(left[:4]), ", ..." if len(left) > 4 else "")
    w = Watch(optimizer, module, {candidates[i][0]: candidates[i][1] for i in chosen}, every, strict, hparams, spec,
              max_numel, large_every)
    w._handles = [optimizer.register_step_pre_hook(w._pre), optimizer.register_step_post_hook(w._post)]
    return w
