"""optbench compare: timing verdicts (significant and beyond the threshold), the ratio's interval, new
failures, exit codes and the command as a user runs it."""

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from optbench.cli import main
from optbench.perf import compare
from optbench.report import load_results
from optbench.report.compare import render
from optbench.results import Results, row

REPO = Path(__file__).parents[1]
LABELS = dict(suite="adam", optimizer="Adam", impl="foreach", dtype="float32", hparams="default", device="cpu",
              workload="model_1m")
MACHINE = {"cpu": "Xeon 8480", "gpu": None, "torch": "2.13.0", "cpu_threads": 2, "python": "3.11.9"}


def rounds(scale=1.0, n=20, noise=0.03, seed=0):
    """Round times of a 10 ms step scaled by ``scale``, with log-normal noise (seeded)."""
    return 10.0 * scale * np.exp(np.random.default_rng(seed).normal(0.0, noise, n))


def timing(samples, labels=LABELS, check="speed"):
    rows = [row(labels, check=check, metric="time.round_ms", value=v, unit="ms", step=i) for i, v in enumerate(samples)]
    return rows + [row(labels, check=check, metric="time.step_ms", value=float(np.median(samples)), unit="ms")]


def verdict(status, labels=LABELS, metric="parity.max_err_eps", step=None):
    return row(labels, check="parity", metric=metric, value=1.0, status=status, unit="eps", step=step)


def write(path, rows, machine=MACHINE) -> Path:
    """A run directory holding results.json (as the harness writes it)."""
    results = Results(path, {"machine": machine})
    results.extend(rows)
    results.finish()
    return path


def tables(tmp_path, base_rows=None, new_rows=None):
    """The two runs' rows as ``optbench compare`` reads them (written first where given)."""
    for name, rows in (("a", base_rows), ("b", new_rows)):
        if rows is not None:
            write(tmp_path / name, rows)
    return load_results(tmp_path / "a" / "results.json")[1], load_results(tmp_path / "b" / "results.json")[1]


def run_cli(capsys, *args):
    code = main(["compare", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


SAME = rounds(seed=1)
CASES = {  # name: (baseline rounds, new rounds, verdict, exit code)
    "identical": (SAME, SAME.copy(), "same", 0),
    "60% slower": (rounds(seed=1), rounds(1.6, seed=2), "slower", 1),
    # rounds of one process per run: as likely a difference between processes as a change (UNDECIDED)
    "30% slower, one process each": (rounds(seed=1), rounds(1.3, seed=2), "unclear", 3),
    "40% faster": (rounds(seed=1), rounds(0.6, seed=2), "faster", 0),  # (one process per run: beyond 1/1.5)
    "2% shift, many rounds": (rounds(n=400, noise=0.01, seed=1), rounds(1.02, n=400, noise=0.01, seed=2), "same", 0),
    "30% slower, 3 rounds": (rounds(n=3, seed=1), rounds(1.3, n=3, seed=2), "n/a", 3),  # nothing compared
    "noisy, overlapping": (rounds(n=8, noise=0.4, seed=10), rounds(1.15, n=8, noise=0.4, seed=11), "same", 0),
}


@pytest.mark.parametrize("name", CASES)
def test_timing_verdict_and_exit_code(name, tmp_path, capsys):
    base, new, expected, code = CASES[name]
    write(tmp_path / "a", timing(base))
    write(tmp_path / "b", timing(new))
    assert run_cli(capsys, tmp_path / "a", tmp_path / "b")[0] == code
    result = compare.compare_timings(*tables(tmp_path))
    assert len(result) == 1
    case = result.iloc[0]
    assert case["verdict"] == expected, case.to_dict()
    assert case["ratio"] == pytest.approx(np.median(new) / np.median(base))
    if name == "2% shift, many rounds":  # significant, but within the 5 % threshold
        assert case["p"] < 1e-6 and case["note"].startswith("significant")
    if name == "noisy, overlapping":  # the median moved past the threshold, but not significantly
        assert case["ratio"] > 1.05 and case["p"] > 0.01 and "not significant" in case["note"]
    if name == "30% slower, 3 rounds":
        assert "baseline has 3 rounds" in case["note"] and math.isnan(case["p"])
    if name == "30% slower, one process each":
        assert case["p"] < 0.01 and "within 50% is not told from a difference between processes" in case["note"]
    if name == "identical":
        assert case["p"] == pytest.approx(1.0) and case["ci_low"] <= 1 <= case["ci_high"]


def test_interval_covers_true_ratio_and_is_deterministic(tmp_path):
    base, new = tables(tmp_path, timing(rounds(seed=1)), timing(rounds(1.6, seed=2)))
    first, second = compare.compare(base, new), compare.compare(base, new)
    case = first.timings.iloc[0]
    assert 1.3 < case["ci_low"] < 1.6 < case["ci_high"] < 1.75
    assert render(first) == render(second)
    wider = compare.compare(base, new, compare.Rule(confidence=0.999)).timings.iloc[0]
    assert wider["ci_low"] < case["ci_low"] and wider["ci_high"] > case["ci_high"]


def test_unstable_bimodal_rounds_are_not_flagged_and_say_so(tmp_path):
    """Rounds that flip between two levels move the median 5x while the distribution barely moves."""
    fast, slow = rounds(0.2, n=17, seed=1), rounds(n=17, seed=2)
    base, new = np.r_[fast[:8], slow[:9]], np.r_[fast[8:], slow[9:]]  # 8 fast + 9 slow, then 9 fast + 8 slow
    case = compare.compare_timings(*tables(tmp_path, timing(base), timing(new))).iloc[0]
    assert case["ratio"] < 0.25 and case["verdict"] == "same" and "not significant" in case["note"]


def test_new_failures(tmp_path, capsys):
    metrics = ["m.pass", "m.xfail", "m.fail", "m.error", "m.absent", "m.steps"]
    base = [verdict("pass", metric="m.pass"), verdict("xfail", metric="m.xfail"), verdict("fail", metric="m.fail"),
            verdict("pass", metric="m.error"), verdict("pass", metric="m.steps", step=1),
            verdict("error", metric="m.crashed")]
    new = [verdict("fail", metric=m) for m in metrics[:3]] + [verdict("error", metric="m.error"),
                                                                verdict("fail", metric="m.absent"),
                                                                verdict("pass", metric="m.steps", step=1),
                                                                verdict("fail", metric="m.steps", step=2),
                                                                verdict("fail", metric="m.crashed")]
    result = compare.compare(*tables(tmp_path, base, new))
    fresh = dict(zip(result.new_failures["metric"], zip(result.new_failures["baseline"], result.new_failures["new"])))
    assert fresh == {"m.pass": ("pass", "fail"), "m.xfail": ("xfail", "fail"), "m.error": ("pass", "error"),
                     "m.absent": ("absent", "fail"), "m.steps": ("pass", "fail")}
    assert list(result.still_failing["metric"]) == ["m.fail", "m.crashed"] and result.regressed
    code, out, _ = run_cli(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1 and "5 new failures: adam/foreach/float32/default/cpu/model_1m/parity/m.pass" in out
    assert "2 still failing" in out


def test_still_failing_alone_is_not_a_regression(tmp_path, capsys):
    write(tmp_path / "a", [verdict("fail"), *timing(rounds(seed=1))])
    write(tmp_path / "b", [verdict("fail"), *timing(rounds(seed=2))])
    code, out, _ = run_cli(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 0
    assert "0 new failures; 1 still failing" in out.splitlines()[-1] and "## Still failing" in out


def test_cases_in_one_run_and_flagged_rows_first(tmp_path, capsys):
    scaling = dict(LABELS, workload="tensors_64")
    fused = dict(LABELS, impl="fused")
    base = [*timing(rounds(seed=1)), *timing(rounds(seed=3), fused), *timing(rounds(seed=5), scaling, "scaling")]
    new = [*timing(rounds(seed=2)), *timing(rounds(1.5, seed=4), fused), *timing(rounds(seed=6), LABELS, "scaling")]
    base_rows, new_rows = tables(tmp_path, base, new)
    result = compare.compare_timings(base_rows, new_rows)
    assert list(result["verdict"]) == ["slower", "same", "only in baseline", "only in new"]
    assert set(compare.compare_timings(base_rows, new_rows.iloc[:0])["verdict"]) == {"only in baseline"}
    assert list(result["impl"])[0] == "fused" and list(result["workload"])[2:] == ["tensors_64", "model_1m"]
    code, out, _ = run_cli(capsys, tmp_path / "a", tmp_path / "b", "--out", tmp_path / "cmp" / "compare.md")
    assert code == 1
    summary = ("2 cases: 1 slower, 0 faster, 1 same, 0 n/a (1 only in baseline, 1 only in new); 0 new failures; "
               "1 case of the baseline missing: scaling adam foreach float32 default cpu tensors_64.")
    assert out.splitlines()[-1] == f"**REGRESSED:** {summary}"
    assert (tmp_path / "cmp" / "compare.md").read_text() == out
    lines = [line for line in out.splitlines() if line.startswith("| adam")]
    assert "slower" in lines[0] and "only in new" in lines[-1]


def test_options_change_the_verdict(tmp_path, capsys):
    write(tmp_path / "a", timing(rounds(seed=1)))
    write(tmp_path / "b", timing(rounds(1.6, seed=2)))
    assert run_cli(capsys, tmp_path / "a", tmp_path / "b", "--threshold", "0.7")[0] == 0
    assert run_cli(capsys, tmp_path / "a", tmp_path / "b", "--alpha", "1e-30")[0] == 0
    code, out, _ = run_cli(capsys, tmp_path / "a", tmp_path / "b", "--confidence", "0.9")
    assert code == 1 and "90% CI" in out


def test_other_machine_warns_in_one_line_and_still_compares(tmp_path, capsys):
    write(tmp_path / "a", timing(rounds(seed=1)))
    write(tmp_path / "b", timing(rounds(1.6, seed=2)), machine=MACHINE | {"torch": "2.14.0", "python": "3.12"})
    code, out, err = run_cli(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1 and "slower" in out
    assert err.count("\n") == 1 and "different machines (torch: 2.13.0 vs 2.14.0)" in err


@pytest.mark.parametrize("args, message", [
    (["missing.json", "b"], "no results file at missing.json"),
    (["a", "b", "--threshold", "0"], "--threshold 0.0: need a number > 0"),
    (["a", "b", "--threshold", "nan"], "--threshold nan"),
    (["a", "b", "--alpha", "1.5"], "--alpha 1.5: need a number between 0 and 1"),
    (["a", "b", "--confidence", "0"], "--confidence 0.0"),
])
def test_usage_errors_are_one_line_exit_2(args, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "a", timing(rounds(seed=1)))
    write(tmp_path / "b", timing(rounds(seed=2)))
    (tmp_path / "bad.json").write_text("[]")
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and message in err and err.count("\n") == 1 and not out, err
    assert run_cli(capsys, "bad.json", "b")[0] == 2
    assert main(["compare", "a", "b", "--threshold", "x"]) == 2  # argparse's mistake: one line too
    err = capsys.readouterr().err
    assert "invalid float value: 'x'" in err and err.count("\n") == 1, err


@pytest.mark.slow  # (slow tier; CI keeps compare's comparisons, in-process)
def test_command_as_a_user_runs_it(tmp_path, capsys):
    def optbench(*args):
        return subprocess.run([sys.executable, "-m", "optbench", "compare", *map(str, args)], cwd=REPO,
                              capture_output=True, text=True, timeout=120)

    a = write(tmp_path / "a", timing(rounds(seed=1)))
    b = write(tmp_path / "b", timing(rounds(1.6, seed=2)))
    slower = optbench(a, b)  # run directories
    assert slower.returncode == 1 and "| slower" in slower.stdout and not slower.stderr, slower.stderr
    code, out, _ = run_cli(capsys, a / "results.json", a / "results.json")  # the rest in this process
    assert code == 0
    assert out.splitlines()[-1] == "**OK:** 1 case: 0 slower, 0 faster, 1 same, 0 n/a; 0 new failures."
    code, _, err = run_cli(capsys, tmp_path / "nope", b)
    assert code == 2 and err == f"optbench: error: no results file at {tmp_path / 'nope'}\n"


def test_different_timing_workload_sizes_are_named():
    base = {"config": {"speed": {"params": 4e6, "min_run_time": 0.5}}}
    new = {"config": {"speed": {"params": 3.3e7, "min_run_time": 2}}}
    assert compare.timing_config_differences(base, new) == "speed.params: 4000000.0 vs 33000000.0"
    assert compare.timing_config_differences(base, base) == ""


def test_verdicts_that_changed_between_two_torch_versions_are_listed_fixed_or_regressed(tmp_path, capsys):
    """Two runs on two torch versions: every verdict that moved is listed, classified (a declared deviation torch
    fixed is an xpass; a fail that passes is fixed; a pass that fails regressed), none silently."""
    base = [verdict("xfail", metric="m.declared"), verdict("fail", metric="m.fixed"),
            verdict("pass", metric="m.broken"), verdict("pass", metric="m.same")]
    new = [verdict("xpass", metric="m.declared"), verdict("pass", metric="m.fixed"),
           verdict("fail", metric="m.broken"), verdict("pass", metric="m.same")]
    result = compare.compare(*tables(tmp_path, base, new))
    moved = dict(zip(result.changed["metric"], result.changed["change"]))
    assert moved == {"m.declared": "fixed", "m.fixed": "fixed", "m.broken": "regressed"}
    code, out, _ = run_cli(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1 and "## Verdicts that changed" in out and "3 verdicts changed (2 fixed, 1 regressed)" in out


def test_a_case_timed_on_a_busy_machine_is_never_called_slower(tmp_path):
    """A 60 % slower new run whose case was flagged unstable (optbench.perf.noise) is n/a, saying why."""
    busy = row(LABELS, check="speed", metric="time.unstable", value=1,
               detail="timed on a busy machine: 3 other runnable tasks on 2 cores (oversubscribed)")
    base, new = timing(rounds(seed=1)), [*timing(rounds(1.6, seed=2)), busy]
    case = compare.compare_timings(*tables(tmp_path, base, new)).iloc[0]
    assert case["verdict"] == "n/a" and "new run timed on a busy machine" in case["note"]
    quiet = compare.compare_timings(*tables(tmp_path / "q", base, timing(rounds(1.6, seed=2)))).iloc[0]
    assert quiet["verdict"] == "slower"


def test_a_comparison_that_compared_nothing_never_says_ok(tmp_path, capsys):
    """Every timing case n/a (the new run timed on a busy machine) and no verdict in both runs: exit 3, never OK; a
    verdict both runs share is a comparison (OK, exit 0); a slower case still regresses."""
    busy = row(LABELS, check="speed", metric="time.unstable", value=1, detail="timed on a busy machine")
    write(tmp_path / "a", timing(rounds(seed=1)))
    write(tmp_path / "b", [*timing(rounds(1.15, seed=2)), busy])
    code, out, _ = run_cli(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 3 and "**NOTHING COMPARED:** no timing case could be compared" in out, out
    tol = row(LABELS, check="parity", metric="parity.tol_eps", value=40.0, unit="eps")  # a pass beside its tolerance
    write(tmp_path / "c", [*timing(rounds(seed=1)), verdict("pass"), tol])
    write(tmp_path / "d", [*timing(rounds(1.15, seed=2)), busy, verdict("pass"), tol])
    code, out, _ = run_cli(capsys, tmp_path / "c", tmp_path / "d")
    assert code == 0 and "**OK:**" in out
