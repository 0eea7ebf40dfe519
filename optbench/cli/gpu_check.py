"""``optbench gpu-check``: the prepared GPU check, every CUDA path in one timed script (``.ci/gpu`` runs it).

A GPU is lent now and then for minutes, so the check is planned ahead and spends them measuring: sections in order
of what they tell (optbench's own Triton Adafactor and torch's on CUDA first; then every suite's CUDA variants;
then the Adafactor kernels' % of HBM roofline over model size; then every suite's speed), each an ``optbench run``
in its own process under its own deadline (SIGTERM, then SIGKILL: a section that overruns keeps the cases it
finished and says so, never a PASS), the whole within ``--budget-s``. It writes each section's run under
``<out>/<section>/`` (default ``reports/examples/cuda-<gpu>/``), then ``summary.md``, and prints the summary.
Exit: the worst section's code (optbench.usage.worst); 2 in one line without a CUDA device. ``--dry-run`` lists
the plan and runs nothing (on any machine).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from optbench.usage import EXIT_INCOMPLETE, EXIT_OK, EXIT_USAGE, Parser, UsageError, did_you_mean, worst

GRACE_S = 20  # after SIGTERM, the run's time to write what it finished


@dataclass(frozen=True)
class Section:
    name: str
    what: str
    overrides: tuple[str, ...]
    share: float  # of the budget; time a section leaves unused passes to the next
    scripts: bool = False  # the CUDA findings' plain-torch scripts instead of an optbench run

    def shown(self, out: Path, case_timeout_s: int, device: str = "cuda") -> str:
        """The command as a user would type it."""
        argv = self.command(out, case_timeout_s, device)
        return shlex.join(["optbench", *argv[3:]])

    def command(self, out: Path, case_timeout_s: int, device: str = "cuda") -> list[str]:
        if self.scripts:
            return [sys.executable, "-m", "optbench", "gpu-check", "--findings", str(out / f"{self.name}.tsv")]
        return [sys.executable, "-m", "optbench", "run", f"device={device}", *self.overrides,
                f"out_dir={out / self.name}", "history_dir=null", f"case_timeout_s={case_timeout_s}"]


FINDINGS = Path(__file__).resolve().parents[2] / "docs" / "findings"  # in the repository (not installed)
SCRIPT_TIMEOUT_S = 120


def cuda_findings() -> list[Path]:
    """The findings' plain-torch scripts that need CUDA (each exits 2 without it), in the repository."""
    return sorted(p for p in FINDINGS.glob("F*.py") if "torch.cuda.is_available()" in p.read_text())


def run_findings(table: Path) -> int:
    """Run each CUDA finding's script; ``table``: one line each, finding, exit code, its last line. Exit 1 where a
    script could not run (2), crashed or hung; a finding that reproduces (1) or no longer does (0) is a result."""
    rows, bad = [], False
    for script in cuda_findings():
        try:
            proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                                  timeout=SCRIPT_TIMEOUT_S)
            code, said = proc.returncode, (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:]
        except subprocess.TimeoutExpired:
            code, said = -1, [f"ran past {SCRIPT_TIMEOUT_S} s"]
        bad |= code not in (0, 1)
        rows.append(f"{script.name.split('_')[0]}\t{code}\t{(said or [''])[0][:200]}")
        table.write_text("\n".join(rows) + "\n")  # after each script: a section stopped at its deadline keeps these
        print(f"  {script.name}: exit {code}: {(said or [''])[0][:200]}", flush=True)
    return 1 if bad or not rows else EXIT_OK


SECTIONS = (
    Section("findings", "the CUDA findings' plain-torch scripts (docs/findings): each exits 1 while it reproduces, 0 "
            "once torch is fixed", (), 0.1, scripts=True),
    Section("adafactor", "suite=adafactor as a user runs it on CUDA: every check, torch's variants and optbench's "
            "Triton kernel (impl=optbench), parity at every dtype, speed and % of roofline",
            ("suite=adafactor", "speed.min_run_time=0.2"), 0.23),
    Section("suites", "every suite's CUDA variants (for-loop, foreach, fused, compiled, capturable, graphed) at every "
            "dtype on its first and round-trip hparam sets, 8 steps: parity, cross, deviations, round-trip (CUDA<->CPU "
            "scenarios included), errors",
            ("suite=all", "hparams=default", "compile_hparams=[first]", "steps=8",
             "checks=[parity,cross,deviations,roundtrip,errors]"), 0.38),
    Section("adafactor-roofline", "Adafactor's step time and % of HBM roofline from 1e6 to 1e8 parameters and over "
            "64 tensors: optbench's Triton kernel against torch's foreach and for-loop, float32 and bfloat16",
            ("suite=adafactor", "checks=[scaling]", "impl=[optbench,foreach,for-loop]", "dtype=[float32,bfloat16]",
             "scaling.params=[1e6,1e7,1e8]", "scaling.tensor_counts=[64]", "scaling.dtypes=null"), 0.13),
    Section("speed", "every suite's step time and % of roofline on the model workload (4e6 parameters), float32, "
            "every variant (the first GPU run timed 39 cases in 87 s: float32 alone, 3 rounds each)",
            ("suite=all", "hparams=first", "dtype=float32", "checks=[speed]", "speed.edge_cases=[]",
             "speed.min_run_time=0.05", "speed.min_rounds=3"), 0.16),
)


def gpu_slug(name: str) -> str:
    """``NVIDIA H100 80GB HBM3`` -> ``h100-80gb-hbm3``."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-") or "gpu"


def plan(names: list[str] | None) -> list[Section]:
    known = [s.name for s in SECTIONS]
    for n in names or ():
        if n not in known:
            raise UsageError(f"gpu-check: unknown section '{n}': {did_you_mean(n, known)}")
    return [s for s in SECTIONS if not names or s.name in names]


def probe(device: str) -> dict:
    """The device, its software, and its in-place stream bandwidth (optbench.perf.ceilings) over 2 GiB (far past any
    GPU's L2; 0.25 GiB on a CPU)."""
    import torch

    from optbench.perf.ceilings import bandwidth

    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    gib = 2.0 if device == "cuda" else 0.25
    measured = bandwidth(torch.device(device), int(gib * 2**30), min_run_time=0.5)
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        name, about = props.name, (f"{props.name} ({props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} "
                                   f"SMs, sm_{props.major}{props.minor}, CUDA {torch.version.cuda})")
    else:
        name = about = f"CPU rehearsal ({os.cpu_count()} cores)"
    return {"name": name, "about": f"{about}; torch {torch.__version__}, triton {triton_version}", "probe_gib": gib,
            "gb_per_s": measured.gb_per_s, "probe_kernel": measured.kernel}


def run_section(section: Section, out: Path, deadline_s: float, device: str = "cuda") -> tuple[int, float, str]:
    """Run one section under ``deadline_s``: (exit code, seconds, how it ended)."""
    from optbench.report.gpu_check import stamped  # here: pandas is slow to import, a refusal is not

    log = out / f"{section.name}.log"
    cmd = section.command(out, max(60, int(deadline_s)), device)
    start = time.monotonic()
    with log.open("w") as sink:
        sink.write(shlex.join(cmd) + "\n")
        sink.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        stopper = _Stopper(proc, start + deadline_s)
        for line in proc.stdout:  # the log's lines stamped with seconds since the section began: where time went
            sink.write(stamped(line, time.monotonic() - start))
            if not line.startswith("  PASS"):  # the passing lines stay in the log
                print(f"[{section.name}] {line}", end="", flush=True)
        code = proc.wait()
        stopper.timer.join()
        ended = stopper.how or "finished"
        if stopper.how and code < 0:  # ended by the signal itself, before it could say anything
            ended = f"stopped at its deadline by signal {-code}: what it finished is in its journal"
    # stopped at its deadline, it did not finish its plan: INCOMPLETE (4), not the user's SIGTERM (143)
    return (EXIT_INCOMPLETE if stopper.how and code != EXIT_OK else code), time.monotonic() - start, ended


class _Stopper:
    """A timer thread: SIGTERM to the section's process group at its deadline, SIGKILL ``GRACE_S`` later (one
    thread sends them, so a signal is never sent twice); ``how`` says which it sent."""

    def __init__(self, proc: subprocess.Popen, deadline: float):
        import threading

        self.proc, self.deadline, self.how = proc, deadline, ""
        self.timer = threading.Thread(target=self._watch, daemon=True)
        self.timer.start()

    def _watch(self) -> None:
        while self.proc.poll() is None:
            now = time.monotonic()
            if now > self.deadline + GRACE_S and not self.how.startswith("killed"):
                self._signal(signal.SIGKILL)
                self.how = "killed at its deadline (SIGTERM did not end it)"
            elif now > self.deadline and not self.how:
                self._signal(signal.SIGTERM)
                self.how = "stopped at its deadline: the cases it finished are kept"
            time.sleep(0.5)

    def _signal(self, sig) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


def gpu_check_command(args: list[str]) -> int:
    parser = Parser(prog="optbench gpu-check", description=(
        "The prepared GPU check: optbench's Triton Adafactor and torch's CUDA variants of every suite, the Adafactor "
        "kernels' %% of HBM roofline and every suite's speed, in timed sections; reports under --out and a summary. "
        "Exit 2 without a CUDA device; otherwise the worst section's exit code."))
    parser.add_argument("--dry-run", action="store_true", help="list the sections and their commands; run nothing")
    parser.add_argument("--budget-s", type=float, default=540.0, help="seconds for all sections (default 540)")
    parser.add_argument("--only", nargs="+", default=None, metavar="SECTION", help="only these sections")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a rehearsal of the same plan on the CPU (slow; for testing the check itself)")
    parser.add_argument("--archive", type=Path, default=None, metavar="FILE.tgz",
                        help="also keep the reports as a gzipped tar, rewritten after every section (a command cut "
                             "at a time limit still leaves the sections it finished)")
    parser.add_argument("--findings", type=Path, default=None, help=argparse.SUPPRESS)  # the findings section's runner
    parser.add_argument("--out", type=Path, default=None,
                        help="where the runs go (default reports/examples/cuda-<gpu>); each section's folder must "
                             "not exist yet")
    ns = parser.parse_args(args)
    if ns.findings is not None:
        return run_findings(ns.findings)
    if ns.budget_s <= 0:
        raise UsageError(f"gpu-check: --budget-s {ns.budget_s:g}: need a positive number of seconds")
    if ns.archive is not None and not ns.archive.parent.is_dir():
        raise UsageError(f"gpu-check: --archive {ns.archive}: no folder {ns.archive.parent} to write it in")
    if ns.archive is not None and ns.archive.is_dir():
        raise UsageError(f"gpu-check: --archive {ns.archive} is a folder: name the .tgz file to write")
    if ns.out is not None and ns.out.exists() and not ns.out.is_dir():
        raise UsageError(f"gpu-check: --out {ns.out} is a file: name a folder")
    sections = plan(ns.only)
    import torch

    has_gpu = torch.cuda.is_available()
    named = gpu_slug(torch.cuda.get_device_name()) if has_gpu else "gpu"
    out = ns.out or Path("reports/examples") / (f"cuda-{named}" if ns.device == "cuda" else "gpu-check-rehearsal-cpu")
    if ns.dry_run:
        print(f"optbench gpu-check: {len(sections)} section(s) in {ns.budget_s:.0f} s, reports under {out}/")
        if any(s.scripts for s in sections):
            print(f"  (the findings section runs {len(cuda_findings())} script(s) of {FINDINGS})")
        for s, budget in zip(sections, _budgets(sections, ns.budget_s)):
            print(f"  {s.name} (up to {budget:.0f} s and what earlier sections leave): {s.what}\n"
                  f"    {s.shown(out, int(budget), ns.device)}")
        return EXIT_OK
    if ns.device == "cuda" and not has_gpu:
        raise UsageError(f"gpu-check: no CUDA device here (torch {torch.__version__}, built with CUDA "
                         f"{torch.version.cuda or 'no'}): run it on a machine with a GPU; --dry-run lists what it runs")
    taken = [s.name for s in sections if (out / s.name).exists()]
    if taken:
        raise UsageError(f"gpu-check: {out / taken[0]} exists: remove it, or pass --out or --only")
    out.mkdir(parents=True, exist_ok=True)
    from optbench.report.gpu_check import summary

    try:
        machine = probe(ns.device)
    except Exception as exc:  # a device that fails its first kernels: nothing after it would be worth running
        raise UsageError(f"gpu-check: probing {ns.device} failed: {type(exc).__name__}: "
                         f"{(str(exc).splitlines() or [''])[0][:200]}") from None
    print(f"optbench gpu-check: {machine['about']}; {machine['gb_per_s']:.0f} GB/s measured; {len(sections)} "
          f"section(s) in {ns.budget_s:.0f} s; reports under {out}/", flush=True)
    codes, ends, start = {}, {}, time.monotonic()
    for i, section in enumerate(sections):
        left = ns.budget_s - (time.monotonic() - start)
        deadline = left * section.share / sum(s.share for s in sections[i:])
        if left < 30:
            ends[section.name] = (None, 0.0, f"not run: {left:.0f} s of the budget left")
            continue
        ends[section.name] = run_section(section, out, deadline, ns.device)
        codes[section.name] = ends[section.name][0]
        _keep(out, summary(out, sections, ends, machine), ns.archive)
    text = summary(out, sections, ends, machine)
    _keep(out, text, ns.archive)
    print("\n" + text)
    if len(codes) < len(sections):
        return worst([*codes.values(), EXIT_INCOMPLETE])  # a section not run: the check did not finish its plan
    return worst(codes.values()) if codes else EXIT_USAGE


def _keep(out: Path, text: str, archive: Path | None) -> None:
    """summary.md as it stands, and the archive of ``out`` rewritten whole (atomically: a cut leaves the last one)."""
    (out / "summary.md").write_text(text)
    if archive is not None:
        import tarfile

        partial = archive.with_name(archive.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(out, arcname=out.name)
        os.replace(partial, archive)


def _budgets(sections: list[Section], total: float) -> list[float]:
    return [total * s.share / sum(x.share for x in sections) for s in sections]
