"""Comparing two runs that a performance engineer can gate merges on, as benchmarks on a quiet machine:

* A/A: the main job's speed cases (suite=adafactor) timed twice with process-level repeats; ``optbench compare``
  flags at most 1 of them (of 22); and the default command (one process per run, suite=adam) in ten consecutive
  pairs: at most 1 flagged in 9 of them;
* an injected slowdown of 15 % more memory traffic per step (tests.candidates.ExtraTrafficAdamW) is flagged
  slower in at least 9 of 10 trials, and the unchanged step never;
* consecutive runs' medians of the main workload agree within 10 %.

``pytest -m benchmark tests/benchmarks/test_cross_run.py -p no:xdist -s`` (about 15 minutes on 2 cores); the
slowdown trials run twice, on a quiet machine and with a busy loop holding one core (``-k a-core-held``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import users_environment

pytestmark = pytest.mark.benchmark
REPO = Path(__file__).parents[2]
REPEATS = "speed.repeats=3"


def optbench(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optbench", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, env=users_environment(OPTBENCH_HISTORY_DIR="", OPTBENCH_PLOTS="false",
                                                           **(env or {})))


def compared(base: Path, new: Path, out: Path) -> list[dict]:
    """``optbench compare``'s timing table, one dict per case (from its Markdown --out file's rows)."""
    optbench("compare", base, new, "--out", out)
    from optbench.perf import compare
    from optbench.results import load_run

    return compare.compare_timings(load_run(base)[1], load_run(new)[1]).to_dict("records")


def model_medians(out: Path) -> dict:
    rows = json.loads((out / "results.json").read_text())["rows"]
    return {(r["impl"], r["dtype"]): r["value"] for r in rows
            if r["metric"] == "time.step_ms" and r["workload"] == "model"}


def test_a_over_a_flags_at_most_one_case_and_consecutive_medians_agree_within_10_percent(tmp_path):
    runs = [tmp_path / "a1", tmp_path / "a2"]
    for out in runs:
        done = optbench("run", "suite=adafactor", "checks=[speed]", REPEATS, f"out_dir={out}")
        assert done.returncode == 0, done.stderr[-2000:]
    cases = compared(*runs, tmp_path / "aa.md")
    flagged = [c for c in cases if c["verdict"] in ("slower", "faster")]
    for c in cases:
        print(f"{c['impl']:>10} {c['dtype']:>8} {c['workload']:>13}: {c['ratio']:.3f} "
              f"[{c['ci_low']:.3f}, {c['ci_high']:.3f}] p={c['p']:.2g} {c['verdict']}")
    print(f"A/A: {len(flagged)} of {len(cases)} cases flagged")
    first, second = (model_medians(r) for r in runs)
    change = {k: second[k] / first[k] - 1 for k in first}  # signed: which way the second run went
    print("consecutive runs, main workload: " + ", ".join(f"{'/'.join(k)} {v:+.1%}" for k, v in change.items()))
    spread = {k: abs(v) for k, v in change.items()}
    assert len(cases) >= 20 and len(flagged) <= 1
    assert max(spread.values()) <= 0.10


def test_default_runs_of_the_same_code_flag_at_most_one_case_in_nine_of_ten_pairs(tmp_path):
    """The default command, one process per run (``speed.repeats`` unset): eleven runs of ``suite=adam
    checks=[speed]``, one after the other, each compared with the one before (ten pairs): at most 1 case flagged
    slower or faster in at least 9 of the 10. Rounds of one process cannot see what differs between processes, so
    a change below 1.5x is ``unclear`` there (the comparison says UNDECIDED), never a flag."""
    runs = [tmp_path / f"r{i}" for i in range(11)]
    for out in runs:
        done = optbench("run", "suite=adam", "checks=[speed]", f"out_dir={out}")
        assert done.returncode == 0, done.stderr[-2000:]
    flagged = []
    for i, (base, new) in enumerate(zip(runs, runs[1:])):
        cases = compared(base, new, tmp_path / f"pair{i}.md")
        verdicts = [c["verdict"] for c in cases]
        flagged.append(sum(v in ("slower", "faster") for v in verdicts))
        print(f"pair {i + 1}: {flagged[-1]} of {len(cases)} flagged, {verdicts.count('unclear')} unclear, "
              f"ratios {min(c['ratio'] for c in cases):.3f} to {max(c['ratio'] for c in cases):.3f}")
    print(f"A/A, default runs: at most 1 flagged in {sum(n <= 1 for n in flagged)} of {len(flagged)} pairs")
    assert sum(n <= 1 for n in flagged) >= 9


@pytest.fixture(params=[False, True], ids=["quiet", "a-core-held"])
def held_core(request):
    """Whether another job holds a core (a busy loop beside the runs, as on a shared CI runner); the runs then time
    with ``speed.threads=1`` (docs/ci.md)."""
    if not request.param:
        yield []
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield ["speed.threads=1"]
    finally:
        spinner.kill()
        spinner.wait()


def test_fifteen_percent_more_memory_traffic_is_flagged_in_nine_of_ten_trials(tmp_path, held_core):
    """Each trial: the unchanged step, then the step with 15 % more traffic, each timed interleaved with torch's
    for-loop AdamW (the anchor, the same code in both runs) in 5 process-level repeats. The control: each unchanged
    run against the next trial's, a minute later. (Compared on their own times, two runs a minute apart differ by
    up to 8 % on this VM even with 10 repeats each: 8 of 10 flagged and 4 of 9 A/A false alarms; anchored with 3
    repeats, 8 of 10 and 0 of 9: Welch's test on 3 + 3 repeats has too few degrees of freedom, 2026-11-26.)"""
    run = ["suite=adamw", "candidate=tests.candidates.ExtraTrafficAdamW", "impl=[candidate,for-loop]",
           "dtype=float32", "checks=[speed]", "speed.edge_cases=[]", "speed.repeats=5", *held_core]
    slower, unchanged, bases = 0, 0, []
    for trial in range(10):
        base, slow = tmp_path / f"{trial}-base", tmp_path / f"{trial}-slow"
        for out, extra in ((base, "0"), (slow, "0.15")):
            done = optbench("run", *run, f"out_dir={out}", env={"OPTBENCH_EXTRA_TRAFFIC": extra})
            assert done.returncode == 0, done.stderr[-2000:]
        injected, = (c for c in compared(base, slow, tmp_path / f"{trial}-slow.md") if c["impl"] != "for-loop")
        slower += injected["verdict"] == "slower"
        line = (f"trial {trial}: +15 % traffic {injected['ratio']:.3f} [{injected['ci_low']:.3f}, "
                f"{injected['ci_high']:.3f}] p={injected['p']:.2g} {injected['verdict']}")
        if bases:
            control, = (c for c in compared(bases[-1], base, tmp_path / f"{trial}-same.md") if c["impl"] != "for-loop")
            unchanged += control["verdict"] == "same"
            line += f"; unchanged vs the trial before {control['ratio']:.3f} p={control['p']:.2g} {control['verdict']}"
        bases.append(base)
        print(line)
    print(f"flagged slower in {slower} of 10 trials; the unchanged step called the same in {unchanged} of 9")
    assert slower >= 9 and unchanged >= 8
