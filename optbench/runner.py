"""Run a suite: cases (implementation x dtype x hyperparameters) -> checks -> results -> report.

Every case is isolated: an exception becomes an ``error`` row and the run goes on; results are saved
after every case. Returns the Results; ``Results.failed`` decides the exit code.
"""

from __future__ import annotations

import logging
import time
import traceback
import warnings
from functools import lru_cache
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from optbench.errors import UsageError
from optbench.machine import machine_info
from optbench.parity import cross_error, run_parity, tolerance_eps
from optbench.report import render_report
from optbench.results import SCHEMA_VERSION, Results
from optbench.roundtrip import check_roundtrip
from optbench.selection import resolve_device, resolve_dtypes, resolve_implementations
from optbench.speed import measure_speed
from optbench.suite import DTYPES, Suite
from optbench.workload import generate

CHECKS = ("parity", "roundtrip", "speed")


def _quiet_torch() -> None:
    warnings.filterwarnings("ignore", message="Sparse invariant checks")
    torch._logging.set_logs(dynamo=logging.ERROR, inductor=logging.ERROR)


class SuiteRun:
    """One run of one suite on one device, writing into ``out_dir``."""

    def __init__(self, cfg: DictConfig, out_dir: Path, echo=print):
        if cfg.suite is None or "optimizer" not in cfg.suite:
            raise UsageError("no suite selected: pass suite=<name> (see 'optbench list')")
        self.cfg, self.echo = cfg, echo
        self.suite = Suite.from_config(cfg.suite)
        self.device = resolve_device(cfg.device.name)
        self.dtypes = resolve_dtypes(cfg, self.suite)
        self.impls = resolve_implementations(cfg, self.suite)
        self.checks = [str(c) for c in cfg.checks]
        unknown = [c for c in self.checks if c not in CHECKS]
        if unknown:
            raise UsageError(f"unknown check(s) {unknown}: available: {', '.join(CHECKS)}")
        if int(cfg.steps) < 1:
            raise UsageError(f"steps={cfg.steps}: need at least 1")
        meta = {"machine": machine_info(self.device), "config": OmegaConf.to_container(cfg, resolve=True)}
        self.results = Results(Path(out_dir), meta)
        self.skip_fqns = {k.fqn for k in self.suite.known_failures}

    @lru_cache(maxsize=None)
    def workload(self, dtype: str, steps: int, purpose: str = "parity"):
        w = self.cfg.speed if purpose == "speed" else self.cfg.workload
        grad_range = self.cfg.workload.grad_log10_range_by_dtype.get(dtype, self.cfg.workload.grad_log10_range)
        full = generate(seed=int(self.cfg.seed), steps=steps, width=int(w.width), layers=int(w.layers),
                        vocab=int(w.vocab), sparse=self.suite.sparse, grad_log10_range=tuple(grad_range))
        return full.restricted(lambda name: name not in self.skip_fqns)

    def case(self, impl, dtype, hparams="") -> dict:
        return {"suite": self.suite.name, "optimizer": self.suite.optimizer, "impl": impl.name,
                "dtype": dtype, "hparams": hparams, "device": self.device.type}

    def guarded(self, case: dict, what: str, fn) -> None:
        """Run one check of one case; an exception is recorded, never fatal."""
        try:
            fn()
        except Exception as exc:  # a crashing implementation is a finding, not a harness failure
            where = traceback.extract_tb(exc.__traceback__)[-1]
            detail = f"{what}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''} ({Path(where.filename).name}:{where.lineno})"
            self.results.add(check="case", metric="case.error", value=1, status="error", detail=detail, **case)
            self.echo(f"  ERROR {case['impl']} {case['dtype']} {case['hparams']}: {detail}")
        self.results.save()

    def run(self) -> Results:
        _quiet_torch()
        started = time.perf_counter()
        self.echo(f"optbench: suite {self.suite.name} ({self.suite.optimizer}) on {self.device}, "
                  f"dtypes {', '.join(self.dtypes)}, impls {', '.join(i.name for i in self.impls)}")
        runnable = {}
        for impl in self.impls:
            for dtype in self.dtypes:
                why = impl.available(self.device, DTYPES[dtype])
                if why:
                    self.results.add(check="case", metric="case.skipped", value=1, status="skip",
                                     detail=f"not available on {self.device.type}/{dtype}: {why}", **self.case(impl, dtype))
                else:
                    runnable.setdefault(dtype, []).append(impl)
        if "parity" in self.checks:
            self.run_parity(runnable)
            self.run_known_failures(runnable)
        if "roundtrip" in self.checks:
            self.run_roundtrip()
        if "speed" in self.checks:
            self.run_speed(runnable)
        self.results.meta["wall_s"] = round(time.perf_counter() - started, 2)
        path = self.results.save()
        render_report(self.results.meta | {"schema_version": SCHEMA_VERSION}, self.results.table, path.parent)
        return self.results

    def run_parity(self, runnable) -> None:
        steps = int(self.cfg.steps)
        for dtype, impls in runnable.items():
            eps = torch.finfo(DTYPES[dtype]).eps
            for hset in self.suite.hparams:
                if hset.dtypes is not None and dtype not in hset.dtypes:
                    continue
                baseline = None
                for impl in sorted(impls, key=lambda i: i.name != "for-loop"):
                    case = self.case(impl, dtype, hset.name)

                    def check(impl=impl, case=case):
                        nonlocal baseline
                        traj = run_parity(impl, self.suite, hset, self.workload(dtype, steps), DTYPES[dtype],
                                          self.device, keep_snapshots=True)
                        self.record_parity(case, traj.errors)
                        if impl.name == "for-loop":
                            baseline = traj.snapshots
                        elif baseline is not None:
                            x = cross_error(traj.snapshots, baseline, eps)
                            self.results.add(check="cross", metric="parity.xmax_err_eps_vs_forloop", value=x, unit="eps",
                                             status="pass" if x <= 2 * tolerance_eps(steps) else "fail", **case)

                    self.guarded(case, "parity", check)

    def record_parity(self, case: dict, errors) -> None:
        add = self.results.add
        errors = errors.assign(tol=tolerance_eps(errors.step))
        worst = errors.loc[errors.err_eps.idxmax()]
        over = errors[errors.err_eps > errors.tol]
        if len(over):
            first = over.iloc[0]
            detail = f"first past tolerance: step {first.step} {first.fqn}/{first.tensor}: {first.err_eps:.3g} eps > {first.tol:.3g} eps"
        else:
            detail = f"within tolerance; worst {worst.fqn}/{worst.tensor} at step {worst.step}"
        status = "fail" if len(over) else "pass"
        add(check="parity", metric="parity.max_err_eps", value=worst.err_eps, unit="eps", status=status, detail=detail, **case)
        add(check="parity", metric="parity.tol_eps", value=tolerance_eps(errors.step.max()), unit="eps", **case)
        for (fqn, tensor), err in errors.groupby(["fqn", "tensor"]).err_eps.max().items():
            add(check="parity", metric="parity.max_err_eps", value=err, unit="eps", fqn=fqn, tensor=tensor, **case)
        for step, err in errors.groupby("step").err_eps.max().items():
            add(check="parity", metric="parity.step_max_err_eps", value=err, unit="eps", step=int(step), **case)
        self.echo(f"  {'PASS' if status == 'pass' else 'FAIL'} parity {case['impl']:>10} {case['dtype']:>8} "
                  f"{case['hparams']:<34} max {worst.err_eps:9.3g} eps" + ("" if status == "pass" else f"  ({detail})"))

    def run_known_failures(self, runnable) -> None:
        """Each declared upstream failure, alone: xfail while it still fails, xpass once fixed."""
        for known in self.suite.known_failures:
            dtype = "float32" if "float32" in runnable else next(iter(runnable), None)
            for impl in runnable.get(dtype, []):
                case = self.case(impl, dtype, self.suite.hparams[0].name)

                def check(impl=impl, case=case):
                    full = generate(seed=int(self.cfg.seed), steps=2, sparse=self.suite.sparse)
                    try:
                        traj = run_parity(impl, self.suite, self.suite.hparams[0], full.restricted(lambda n: n == known.fqn),
                                          DTYPES[dtype], self.device)
                        ok = bool((traj.errors.err_eps <= tolerance_eps(traj.errors.step)).all())
                        seen = "passes now: remove it from the suite's known_failures" if ok else "still fails parity"
                    except Exception as exc:
                        ok, seen = False, f"still raises {type(exc).__name__}: {exc}"
                    self.results.add(check="known_failure", metric="known_failure.observed", value=float(ok), fqn=known.fqn,
                                     status="xpass" if ok else "xfail", detail=f"{known.reason}. Observed: {seen}", **case)

                self.guarded(case, "known failure", check)

    def run_roundtrip(self) -> None:
        rt = self.cfg.roundtrip
        hset = self.suite.hparam_set(self.suite.roundtrip_hparams)
        for impl in self.impls:
            case = self.case(impl, rt.dtype, hset.name)
            if impl.available(self.device, DTYPES[rt.dtype]):
                continue

            def check(impl=impl, case=case):
                r = check_roundtrip(impl, hset, self.workload(rt.dtype, int(rt.steps)), DTYPES[rt.dtype], self.device,
                                    int(rt.save_at))
                self.results.add(check="roundtrip", metric="roundtrip.positional_misattributed",
                                 value=len(r.positional_misattributed), unit="fqns", detail=r.positional_detail, **case)
                self.results.add(check="roundtrip", metric="roundtrip.by_name_bitwise", value=float(r.by_name_bitwise),
                                 status="pass" if r.by_name_bitwise else "fail", detail=r.by_name_detail, **case)
                self.echo(f"  {'PASS' if r.by_name_bitwise else 'FAIL'} round-trip {case['impl']:>10}: by name "
                          f"{'bit-exact' if r.by_name_bitwise else 'DIFFERS'}; positional misattributed "
                          f"{len(r.positional_misattributed)} FQNs")

            self.guarded(case, "round-trip", check)

    def run_speed(self, runnable) -> None:
        hset = self.suite.hparams[0]
        for dtype, impls in runnable.items():
            for impl in impls:
                case = self.case(impl, dtype, hset.name)

                def check(impl=impl, case=case):
                    s = measure_speed(impl, hset, self.workload(dtype, 1, "speed"), DTYPES[dtype], self.device,
                                      float(self.cfg.speed.min_run_time))
                    add = self.results.add
                    add(check="speed", metric="time.step_ms", value=s.median_s * 1e3, unit="ms", **case)
                    add(check="speed", metric="time.step_ms_iqr", value=s.iqr_s * 1e3, unit="ms", **case)
                    add(check="speed", metric="time.rounds", value=s.rounds, **case)
                    add(check="speed", metric="speed.params_per_s", value=s.params_per_s, unit="params/s", **case)
                    add(check="speed", metric="speed.gb_per_s", value=s.gb_per_s, unit="GB/s", **case)
                    total = sum(s.state_bytes.values())
                    add(check="memory", metric="mem.state_bytes", value=total, unit="B", **case)
                    add(check="memory", metric="mem.state_bytes_per_param", value=total / max(s.numel, 1), unit="B", **case)
                    for fqn, nbytes in s.state_bytes.items():
                        add(check="memory", metric="mem.state_bytes", value=nbytes, unit="B", fqn=fqn, **case)
                    self.echo(f"  speed {case['impl']:>10} {dtype:>8}: {s.median_s * 1e3:8.3f} ms/step "
                              f"(IQR {s.iqr_s * 1e3:.3f}), {s.gb_per_s:.2f} GB/s, state {total / max(s.numel, 1):.2f} B/param")

                self.guarded(case, "speed", check)
