"""Workloads by name: the seeded parameter sets and gradient streams an hparam set runs on.

``transformer`` (dense, the default), ``sparse_embedding`` (COO row gradients), ``zoo`` and
``zoo_sparse`` (bug-zoo edge cases, see ``zoo``), ``objective`` / ``objective_zoo`` (the
transformer's or the zoo's parameters with a seeded loss instead of a gradient stream, for
closure-driven optimizers such as LBFGS) and ``objective_concave`` (that loss negated, for ``maximize=True``),
``umup`` and ``umup_plain`` (the transformer's parameters with the u-muP metadata lr-scaled optimizers read,
see ``umup``).
"""

from __future__ import annotations

from collections.abc import Callable

from optbench.workloads import transformer, umup, zoo
from optbench.workloads.model import ParamSpec, SparseGrad, Workload, reference_gradient


def _with_objective(base: Workload, name: str, seed: int, steps: int, notes: tuple[str, ...],
                    sign: float = 1.0) -> Workload:
    """``base``'s parameters with a seeded loss over them instead of a gradient stream (``sign=-1``: negated)."""
    from optbench.workloads.objective import make_objective

    frozen = {s.name for s in base.specs if s.kind == "frozen"}
    objective = make_objective(seed, {s.name: s.shape for s in base.specs}, frozen=frozen, sign=sign)
    specs = tuple(s if s.kind != "sometimes_none" else ParamSpec(s.name, s.shape, "dense", s.init_std)
                  for s in base.specs)
    return Workload(name, specs, base.init, tuple({} for _ in range(steps)), objective=objective,
                    notes=("seeded loss: a closure-driven optimizer evaluates it", *notes))


def _objective(*, seed: int, steps: int, width: int, layers: int, vocab: int, **_) -> Workload:
    base = transformer.generate(seed=seed, steps=0, width=width, layers=layers, vocab=vocab)
    return _with_objective(base, "objective", seed, steps,
                           ("frozen parameter", "zero-size parameter last", "0-dim parameter"))


def _objective_concave(*, seed: int, steps: int, width: int, layers: int, vocab: int, **_) -> Workload:
    base = transformer.generate(seed=seed, steps=0, width=width, layers=layers, vocab=vocab)
    return _with_objective(base, "objective_concave", seed, steps, ("the negated loss: maximize=True climbs it",),
                           sign=-1.0)


def _objective_zoo(*, seed: int, steps: int, **_) -> Workload:
    base = zoo.generate(seed=seed, steps=0)
    return _with_objective(base, "objective_zoo", seed, steps, ("zero-size tensors interleaved with real ones",
                                                                "3-D and 0-dim parameters"))


GENERATORS: dict[str, Callable[..., Workload]] = {
    "transformer": lambda **kw: transformer.generate(**kw),
    "sparse_embedding": lambda **kw: transformer.generate(sparse=True, **kw),
    "zoo": lambda *, seed, steps, grad_log10_range, **_: zoo.generate(seed=seed, steps=steps,
                                                                        grad_log10_range=grad_log10_range),
    "zoo_sparse": lambda *, seed, steps, grad_log10_range, **_: zoo.generate(seed=seed, steps=steps, sparse=True,
                                                                               grad_log10_range=grad_log10_range),
    "objective": _objective,
    "objective_zoo": _objective_zoo,
    "objective_concave": _objective_concave,
    **umup.GENERATORS,  # umup, umup_plain: the transformer's parameters tagged as a u-muP model tags them
}


def build(name: str, **kwargs) -> Workload:
    """The workload ``name`` (see ``GENERATORS``) from seed, steps and sizes."""
    return GENERATORS[name](**kwargs)


__all__ = ["GENERATORS", "ParamSpec", "SparseGrad", "Workload", "build", "reference_gradient"]
