"""state_dict round-trip by parameter name.

An optimizer built from named parameters runs ``k`` steps, is saved with ``torch.save`` and read back
with ``torch.load(weights_only=True)``, then loaded into a fresh optimizer whose parameters come in
another order (reversed within each group), once with torch's positional ``load_state_dict`` and once
with ``load_state_dict_by_name``; both continue to the end and are compared with an uninterrupted run.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import torch

from optbench.cases import Case, Outcome, RunContext
from optbench.kernels import Implementation
from optbench.results import row
from optbench.state_by_name import load_state_dict_by_name
from optbench.suite import DTYPES, HparamSet, Suite
from optbench.trajectory import as_array, set_gradients, snapshot
from optbench.workloads import Workload


@dataclass(frozen=True)
class RoundTrip:
    positional_misattributed: list[str]  # FQNs whose state torch attached to another parameter
    positional_detail: str
    by_name_bitwise: bool
    by_name_detail: str


def _run(impl, hset, params, order, workload, steps: range, state_dict=None, loader=None):
    stepper = hset.build(impl, params, order)
    if state_dict is not None:
        loader(stepper.optimizer, state_dict)
    for step in steps:
        set_gradients(params, workload, step)
        stepper.step()
    return stepper.optimizer


def _clone(params: dict[str, torch.nn.Parameter]) -> dict[str, torch.nn.Parameter]:
    out = {}
    for n, p in params.items():
        value = torch.empty_strided(p.shape, p.stride(), dtype=p.dtype, device=p.device).copy_(p.detach())
        out[n] = torch.nn.Parameter(value, requires_grad=p.requires_grad)
    return out


def _saved_state_by_name(state_dict: dict) -> dict[str, dict]:
    return {
        name: state_dict["state"][pid]
        for group in state_dict["param_groups"]
        for name, pid in zip(group["param_names"], group["params"])
        if pid in state_dict["state"]
    }


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return a is not None and b is not None and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def _diff(final: dict, expected: dict) -> list[str]:
    return sorted(f"{n}/{k}" for (n, k) in expected.keys() | final.keys() if not _same(final.get((n, k)), expected.get((n, k))))


def check_roundtrip(impl: Implementation, hset: HparamSet, workload: Workload, dtype, device, save_at: int) -> RoundTrip:
    order = [s.name for s in workload.specs]
    permuted = list(reversed(order))
    full, first, rest = range(workload.steps), range(save_at), range(save_at, workload.steps)

    params = workload.materialize(dtype, device)
    expected = snapshot(_run(impl, hset, params, order, workload, full), params)

    params = workload.materialize(dtype, device)
    saved = _run(impl, hset, params, order, workload, first).state_dict()
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    by_name_saved = _saved_state_by_name(loaded)

    # torch's positional load: which names end up holding another parameter's state?
    fresh = _clone(params)
    optimizer = hset.build(impl, fresh, permuted).optimizer
    try:
        optimizer.load_state_dict(loaded)
        attached = {n: optimizer.state.get(p, {}) for n, p in fresh.items()}
        wrong = sorted(
            n for n, st in attached.items()
            if any(not _same(as_array(v), as_array(by_name_saved.get(n, {}).get(k))) for k, v in st.items() if as_array(v) is not None)
            or (n in by_name_saved and not st)
        )
        detail = (
            f"torch's positional load_state_dict attached the wrong state to {len(wrong)} of "
            f"{len(by_name_saved)} FQNs with state (PyTorch #1489), e.g. {', '.join(wrong[:3])}"
            if wrong else "positional load attached every state to the right parameter"
        )
    except Exception as exc:  # torch rejects some layouts outright; that is a finding too
        wrong, detail = sorted(by_name_saved), f"positional load_state_dict raised {type(exc).__name__}: {exc}"

    fresh = _clone(params)
    final = snapshot(_run(impl, hset, fresh, permuted, workload, rest, loaded, load_state_dict_by_name), fresh)
    mismatched = _diff(final, expected)
    by_name_detail = (
        f"saved after step {save_at}, reloaded in reversed order: continued run equals the uninterrupted run bit for bit"
        if not mismatched else f"continued run differs from the uninterrupted run at {len(mismatched)} tensors, e.g. {', '.join(mismatched[:3])}"
    )
    return RoundTrip(wrong, detail, not mismatched, by_name_detail)


class RoundTripCheck:
    """One case per implementation, on the suite's ``roundtrip_hparams`` at ``roundtrip.dtype``."""

    name = "roundtrip"
    requires = ()

    def cases(self, suite: Suite, ctx: RunContext) -> list[Case]:
        dtype, hset = str(ctx.cfg.roundtrip.dtype), suite.hparam_set(suite.roundtrip_hparams)
        return [Case(suite, impl, dtype, hset, ctx.device) for impl in ctx.impls[suite.name]
                if not ctx.unavailable(impl, dtype)]

    def group(self, case: Case) -> tuple:
        return (case.suite.name, self.name)

    def run(self, case: Case, ctx: RunContext) -> Outcome:
        if case.suite.closure_driven:
            return Outcome([row(case.labels, check="roundtrip", metric="roundtrip.by_name_bitwise", value=0, status="skip",
                                detail="not applicable: a closure-driven optimizer (LBFGS) keeps its whole state as flat "
                                       "vectors under its first parameter, so no state belongs to a name")])
        rt = ctx.cfg.roundtrip
        workload = ctx.workload(case.suite, case.hset, case.dtype, steps=int(rt.steps))
        r = check_roundtrip(case.impl, case.hset, workload, DTYPES[case.dtype], ctx.device, int(rt.save_at))
        status, detail = ("pass" if r.by_name_bitwise else "fail"), r.by_name_detail
        declared = case.suite.deviations_for(case.impl_name, case.dtype, case.hset.name, check="roundtrip")
        if declared:  # a recorded upstream reason why this implementation cannot continue bit for bit
            status = "xfail" if not r.by_name_bitwise else "xpass"
            detail += f"; declared: {declared[0].finding}: {declared[0].reason}"
        rows = [row(case.labels, check="roundtrip", metric="roundtrip.positional_misattributed",
                    value=len(r.positional_misattributed), unit="fqns", detail=r.positional_detail),
                row(case.labels, check="roundtrip", metric="roundtrip.by_name_bitwise", value=float(r.by_name_bitwise),
                    status=status, detail=detail)]
        line = (f"  {status.upper():5} round-trip {case.impl_name:>10}: by name "
                f"{'bit-exact' if r.by_name_bitwise else 'DIFFERS'}; positional misattributed "
                f"{len(r.positional_misattributed)} FQNs")
        return Outcome(rows, line)
