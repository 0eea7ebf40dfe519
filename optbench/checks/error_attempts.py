"""Asking an optimizer an invalid input (``checks.error_inputs``): the parameters an input names, one attempt to build
(and step) the class with it, and the answers a candidate gave, recorded in its worker and replayed by the judge.
"""

from __future__ import annotations

import builtins
import warnings

import torch

from optbench.adapters.group_options import carried
from optbench.hyperparameters import for_torch
from optbench.implementations import Implementation
from optbench.implementations.candidate import first_buildable
from optbench.numerics.recording_file import RecordingError, raised_data, raised_from
from optbench.suite.spec import ErrorInput, Suite


def _p(*shape, dtype=torch.float32) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.rand(shape, dtype=dtype) + 0.5)  # shape () too


def _sparse_param() -> torch.Tensor:
    return torch.eye(3).to_sparse().requires_grad_()


PARAMS = {  # name -> (params argument, the tensors that get gradients)
    "default": lambda: (lambda a, b: ([("a.weight", a), ("b.weight", b)], [a, b]))(_p(4, 3), _p(3, 5)),
    "single_tensor": lambda: (lambda a: (a, [a]))(_p(4, 3)),
    "duplicate_in_group": lambda: (lambda a: ([a, a], [a]))(_p(4, 3)),
    "duplicate_across_groups": lambda: (lambda a: ([{"params": [a]}, {"params": [a]}], [a]))(_p(4, 3)),
    "mixed_names": lambda: (lambda a, b: ([("a.weight", a), b], [a, b]))(_p(4, 3), _p(3, 5)),
    "mixed_named_groups": lambda: (lambda a, b: ([{"params": [("a.weight", a)]}, {"params": [b]}], [a, b]))(
        _p(4, 3), _p(3, 5)),
    "complex": lambda: (lambda a: ([("a.weight", a)], [a]))(_p(4, 3, dtype=torch.complex64)),
    "one_d": lambda: (lambda a, b: ([("a.weight", a), ("b.bias", b)], [a, b]))(_p(4, 3), _p(3)),
    "two_groups": lambda: (lambda a, b: ([{"params": [("a.weight", a)]}, {"params": [("b.weight", b)], "lr": 0.1}],
                                         [a, b]))(
        _p(4, 3), _p(3, 5)),
    "unnamed": lambda: (lambda a, b: ([a, b], [a, b]))(_p(4, 3), _p(3, 5)),
    "scalar": lambda: (lambda a: ([a], [a]))(_p()),
    "zero_columns": lambda: (lambda a: ([a], [a]))(_p(3, 0)),
    "sparse_param": lambda: (lambda a: ([a], [a]))(_sparse_param()),
    "sparse_param_in_groups": lambda: (lambda a, b: ([{"params": [a]}, {"params": [b]}], [a, b]))(
        _p(4, 3), _sparse_param()),
}
GRADIENTS = {"dense": lambda p: torch.ones_like(p), "sparse": lambda p: torch.ones_like(p).to_sparse()}


def exception_class(name: str) -> type:
    """A builtin or torch exception by name, or any by dotted path (a library's own: ``pkg.errors.BadLR``)."""
    cls = getattr(builtins, name, None) or getattr(torch, name, None)
    if cls is None and "." in name:
        from optbench.dotted import CandidateError, import_dotted

        try:
            cls = import_dotted(name, "exception class")
        except CandidateError:
            cls = None
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise ValueError(f"error input expects unknown exception class {name!r}")
    return cls


def attempt(cls: type, e: ErrorInput, meta: dict | None = None, options: dict | None = None,
            group_options: dict | None = None) -> tuple[BaseException | None, str]:
    """Build (and step) ``cls`` as ``e`` says (with ``options``, ``e.options`` spelled as ``cls`` spells them),
    its parameters carrying ``e.meta`` (else ``meta``), in groups carrying ``group_options`` (a candidate spec's);
    (what was raised or warned, or None; where)."""
    expected = exception_class(e.raises)
    params, with_grad = PARAMS[e.params]()
    if group_options and not isinstance(params, torch.Tensor):  # a bare Tensor stays the class's own error
        params = ([carried(group_options, g) for g in params] if all(isinstance(g, dict) for g in params)
                  else [carried(group_options, {"params": list(params)})])
    for p in with_grad:
        for key, value in (e.meta if e.meta is not None else meta or {}).items():
            setattr(p, key, value)
    where = "construction"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            optimizer = cls(params, **for_torch(e.options if options is None else options))
            if e.at == "step":
                where = "step"
                for p in with_grad:
                    p.grad = GRADIENTS[e.grad](p.detach())
                if isinstance(optimizer, torch.optim.LBFGS):
                    optimizer.step(lambda: sum((p.real * p.real).sum() for p in with_grad))
                else:
                    optimizer.step()
        except Exception as exc:
            return exc, where
    if issubclass(expected, Warning):
        found = next((w.message for w in caught if issubclass(w.category, expected)), None)
        return found, "construction"
    return None, where


def raised_as(raised: BaseException, names) -> bool:
    """Whether ``raised`` is an instance of one of the exception classes ``names`` (``exception_class``'s); one the
    judge rebuilt from a recording is matched by its recorded class names (a library's class is never imported)."""
    recorded = getattr(raised, "recorded_names", None)
    if recorded is not None:
        return any(str(n).rpartition(".")[2] in recorded for n in names)
    return isinstance(raised, tuple(exception_class(n) for n in names))


class Answering:
    """How a case asks the implementation: directly (``entries`` None: in this process, nothing kept), recording
    each answer (``record=True``: a candidate's worker, for the judge) or replaying recorded ones (the judge)."""

    def __init__(self, entries: tuple | None = None, record: bool = False):
        self.replaying, self.record = entries is not None, record
        self.entries, self.read = list(entries or ()), 0

    def attempt(self, *args) -> tuple[BaseException | None, str]:
        if self.replaying:
            answer = self._next("attempt")
            return (None if answer["raised"] is None else raised_from(answer["raised"]).exception()), \
                str(answer["where"])
        raised, where = attempt(*args)
        if self.record:
            self.entries.append({"attempt": True, "raised": None if raised is None else raised_data(raised),
                                 "where": where})
        return raised, where

    def buildable(self, impl: Implementation, suite: Suite) -> dict | None:
        """A candidate's arguments on the first hparam set it builds (None: none; replayed: whether it built)."""
        if self.replaying:
            return {} if self._next("buildable")["buildable"] else None
        usable = _buildable_base(impl, suite)
        if self.record:
            self.entries.append({"buildable": usable is not None})
        return usable

    def finished(self) -> None:
        if self.replaying and self.read != len(self.entries):
            raise RecordingError(f"the recording holds {len(self.entries)} answers, the check asked {self.read}")

    def _next(self, kind: str) -> dict:
        if self.read >= len(self.entries) or kind not in self.entries[self.read]:
            raise RecordingError(f"the recording holds no {kind} answer at {self.read + 1}: it is not this check's")
        self.read += 1
        return self.entries[self.read - 1]


def _buildable_base(impl: Implementation, suite: Suite) -> dict | None:
    """A candidate's arguments on the first hparam set it builds (None: none)."""
    usable = first_buildable(impl, suite.hparams, {"weight": torch.nn.Parameter(torch.zeros(2, 2))})
    return {**impl.base_kwargs, **impl.spelled(usable.options)} if usable is not None else None
