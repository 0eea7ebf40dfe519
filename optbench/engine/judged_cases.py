"""The cases a judge (``engine.judge``) judges, planned again in the parent from the plan's labels: the candidate
stands in as its spec (data) alone, with what the plan found of its class (``Blueprint.judging``)."""

from __future__ import annotations

from collections.abc import Callable

from optbench.cases import Case, RunContext
from optbench.checks import REGISTRY
from optbench.checks.error_inputs import error_inputs
from optbench.checks.forms import forms
from optbench.checks.registry import judged_by
from optbench.engine.blueprint import Blueprint
from optbench.engine.selection import candidate_spec, suite_variants
from optbench.implementations import Implementation


class JudgedCases:
    """A run's planned cases by index, as the judge plans them (``case``), and what it looks up among them."""

    def __init__(self, planner, blueprint: Callable[[], Blueprint], candidate: str):
        self.planner, self.blueprint, self.candidate = planner, blueprint, candidate
        self._crosses: tuple | None = None  # (the blueprint, its cross cases' indices by their labels)

    def cross_of(self, index: int) -> int | None:
        """The candidate's cross case of the same group as its parity case ``index`` (None: the run plans none)."""
        blueprint = self.blueprint()
        if self._crosses is None or self._crosses[0] is not blueprint:
            self._crosses = (blueprint, {tuple(sorted(e.labels.items())): i for i, e in enumerate(blueprint.entries)
                                         if judged_by(e.check) == "from_parity"})
        return self._crosses[1].get(tuple(sorted(blueprint.entries[index].labels.items())))

    def variants(self, suite_name: str) -> list[Implementation]:
        """The suite's torch (and optbench) implementations the run planned cases of."""
        planned = {e.labels["impl"] for e in self.blueprint().entries if e.labels["suite"] == suite_name}
        suite = next(s for s in self.planner.suites if s.name == suite_name)
        return [impl for name, impl in suite_variants(suite).items() if name in planned]

    def case(self, index: int, ctx: RunContext) -> Case:
        """The planned case, built here from the plan's labels: the candidate stands in as its spec (data) alone."""
        entry = self.blueprint().entries[index]
        labels = entry.labels
        suite = next((s for s in self.planner.suites if s.name == labels["suite"]), None)
        if entry.check == "errors":  # no hparam set: the error input's index in the suite's list
            hset, label = None, labels["hparams"]
            if suite is None or not label.isdigit() or int(label) >= len(error_inputs(suite)):
                raise LookupError(f"the judge plans no error input {labels['suite']}/{label}")
        elif entry.check != "forms":
            label = ""
            hset = next((h for h in suite.hparams if h.name == labels["hparams"]), None) if suite else None
            if hset is None:
                raise LookupError(f"the judge plans no {entry.check} case {labels['suite']}/{labels['hparams']}")
        facts = self.blueprint().judging or {}
        impl = Implementation(labels["impl"], None, is_candidate=True, spec=candidate_spec(self.candidate, suite),
                              inherits_deviations=bool(facts.get("inherits_deviations", False)),
                              named=bool(facts.get("named", True)))
        if entry.check == "deviations":  # which deviation: its place among the run's cases of the same labels
            return self._planned(index, impl, suite, ctx)
        if entry.check == "forms":  # a form of the suite's first set, as the plan found the class takes them
            formed = forms(suite, facts["forms"], self.planner.steps) if suite and facts.get("forms") else []
            hset, twin = next(((h, t) for h, t in formed if h.name == labels["hparams"]), (None, None))
            if hset is None:
                raise LookupError(f"the judge plans no form {labels['suite']}/{labels['hparams']}")
            label = twin or ""
        case = Case(suite, impl, labels["dtype"], hset, self.planner.device, label=label)
        if case.labels != labels:
            raise LookupError(f"the judge planned another case ({case.labels}) than {labels}")
        return case

    def _planned(self, index: int, impl: Implementation, suite, ctx: RunContext) -> Case:
        """The case ``index`` as its check plans it for ``impl``: the n-th of its cases with the labels of the n-th
        such entry of the plan."""
        entries = self.blueprint().entries
        entry = entries[index]
        nth = sum(e.check == entry.check and e.labels == entry.labels for e in entries[:index])
        ctx.impls = {suite.name: [impl]}
        try:
            planned = [c for c in REGISTRY[entry.check].cases(suite, ctx) if c.labels == entry.labels]
        finally:
            ctx.impls = {}
        if nth >= len(planned):
            raise LookupError(f"the judge plans no {entry.check} case {entry.labels} (#{nth + 1})")
        return planned[nth]
