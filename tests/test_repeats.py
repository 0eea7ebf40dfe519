"""Process-level repeats (speed.repeats): a case's repeats merged into one outcome, run in fresh worker processes,
and optbench compare testing between processes where both runs have them."""

import json

import numpy as np
import pytest

from optbench.cli import main
from optbench.engine.repeats import merge
from optbench.perf import compare
from optbench.results import row
from tests.conftest import QUICK_TIMING
from tests.test_compare import LABELS, MACHINE, rounds, tables, timing


def repeat(scale: float, seed: int, n: int = 10, check: str = "speed") -> tuple[list[dict], str]:
    """One repeat's outcome: its rounds (a 10 ms step times ``scale``), median, a ratio and the unstable flag."""
    samples = rounds(scale, n=n, noise=0.01, seed=seed)
    rows = timing(samples, check=check)
    rows += [row(LABELS, check=check, metric="time.rounds", value=n),
             row(LABELS, check=check, metric="speed.ratio", value=scale),
             row(LABELS, check=check, metric="time.unstable", value=int(scale > 1.5),
                 detail="busy" if scale > 1.5 else "")]
    return rows, f"  speed foreach: {np.median(samples):.3f} ms/step"


def test_repeats_merge_into_one_case_every_round_kept_and_the_median_of_medians():
    outcomes = [repeat(1.0, 1), repeat(1.1, 2), repeat(0.95, 3)]
    rows, line = merge(outcomes)
    by = lambda metric: [r for r in rows if r["metric"] == metric]  # noqa: E731
    medians = [r["value"] for r in by("time.repeat_ms")]
    assert [r["step"] for r in by("time.repeat_ms")] == [0, 1, 2]
    assert {r["optimizer"] for r in by("time.repeat_ms") + by("time.repeat_cv")} == {LABELS["optimizer"]}
    assert medians == [next(r["value"] for r in o[0] if r["metric"] == "time.step_ms") for o in outcomes]
    assert by("time.step_ms")[0]["value"] == pytest.approx(np.median(medians))
    assert [r["step"] for r in by("time.round_ms")] == list(range(30))  # every repeat's rounds, numbered on
    assert by("time.rounds")[0]["value"] == 30 and by("speed.ratio")[0]["value"] == pytest.approx(1.0)
    cv = by("time.repeat_cv")[0]
    assert cv["value"] == pytest.approx(np.std(medians, ddof=1) / np.mean(medians))
    assert "fresh worker process" in cv["detail"] and "3 repeats" in line
    assert by("time.unstable")[0]["value"] == 0
    unstable = lambda outcomes: next(r for r in merge(outcomes)[0] if r["metric"] == "time.unstable")  # noqa: E731
    one = unstable([repeat(1.0, 1), repeat(2.0, 2), repeat(1.0, 3)])  # one busy repeat of three: said, not unstable
    assert one["value"] == 0 and one["detail"].startswith("1 of 3 repeats only timed on a busy machine: busy")
    assert unstable([repeat(2.0, 1), repeat(2.0, 2), repeat(1.0, 3)])["value"] == 1  # most of them: unstable
    error = ([row(LABELS, check="speed", metric="case.error", value=1, status="error", detail="boom")], "ERROR")
    assert merge([repeat(1.0, 1), error, repeat(1.0, 3)]) == error  # a repeat that errored is the outcome


@pytest.mark.slow  # (slow tier; CI keeps merging and comparing repeats)
def test_speed_repeats_run_in_fresh_workers_and_are_recorded_once(tmp_path):
    out = tmp_path / "run"
    assert main(["run", "suite=sgd", "dtype=float32", "impl=[for-loop,foreach]", "checks=[speed]", "jobs=1",
                 "speed.repeats=2", *QUICK_TIMING, "speed.edge_cases=[]", f"out_dir={out}"]) == 0
    rows = json.loads((out / "results.json").read_text())["rows"]
    for impl in ("for-loop", "foreach"):
        mine = [r for r in rows if r["impl"] == impl]
        repeats = [r for r in mine if r["metric"] == "time.repeat_ms"]
        assert [r["step"] for r in repeats] == [0, 1] and "fresh worker process" in repeats[0]["detail"]
        assert len([r for r in mine if r["metric"] == "time.step_ms"]) == 1
        assert next(r["value"] for r in mine if r["metric"] == "time.step_ms") == pytest.approx(
            np.median([r["value"] for r in repeats]))
    assert main(["run", "suite=sgd", "speed.repeats=0", f"out_dir={tmp_path / 'bad'}"]) == 2


def repeats_of(medians, labels=LABELS, seed=0):
    """One run's rows: each repeat's rounds (tight within the process) and its median."""
    rows = []
    for r, m in enumerate(medians):
        samples = rounds(m / 10.0, n=10, noise=0.005, seed=seed + r)
        rows += [row(labels, check="speed", metric="time.round_ms", value=v, unit="ms", step=10 * r + i)
                 for i, v in enumerate(samples)]
        rows.append(row(labels, check="speed", metric="time.repeat_ms", value=float(np.median(samples)), step=r))
    all_rounds = [x["value"] for x in rows if x["metric"] == "time.round_ms"]
    return rows + [row(labels, check="speed", metric="time.step_ms", value=float(np.median(all_rounds)))]


def test_compare_tests_between_processes_where_both_runs_repeated(tmp_path):
    """Rounds are tight within a process, the processes differ by ~6 %: on rounds alone that reads as a change
    (the A/A false alarm, which compare no longer claims: one process per run is unclear within 50 %); between processes
    it is noise. A 25 % slowdown well beyond the noise is flagged."""
    a, b = [10.0, 10.6, 9.5], [10.5, 9.8, 10.9]
    result = compare.compare_timings(*tables(tmp_path, repeats_of(a), repeats_of(b, seed=7)))
    assert result.iloc[0]["verdict"] == "same" and "between processes: 3 vs 3" in result.iloc[0]["note"]
    one = lambda medians, seed: [r for r in repeats_of(medians, seed=seed) if r["metric"] != "time.repeat_ms"]  # noqa: E731
    on_rounds = compare.compare_timings(*tables(tmp_path / "rounds", one([10.0], 0), one([10.6], 7)))
    assert on_rounds.iloc[0]["verdict"] == "unclear" and "rounds of one process" in on_rounds.iloc[0]["note"]
    assert "a change within 50% is not told from a difference between processes" in on_rounds.iloc[0]["note"]
    claimed = compare.compare_timings(*tables(tmp_path / "rounds"), compare.Rule(one_process=0.0))
    assert claimed.iloc[0]["verdict"] == "slower"  # what it said before: the A/A false alarm
    quiet = [10.0, 10.3, 9.8]  # Welch's test on 3 + 3 repeats has few degrees of freedom: noise of ~2 % here
    slower = compare.compare_timings(*tables(tmp_path / "slow", repeats_of(quiet), repeats_of([12.5, 12.6, 12.4],
                                                                                              seed=9)))
    case = slower.iloc[0]
    assert case["verdict"] == "slower" and case["ci_low"] > 1.05 and case["p"] < 0.01


def aa_run(path, scale, seed, sha="abc123", dirty=False):
    """A run folder: the 10 ms step at ``scale``, tight rounds (as one process times them), a machine with a commit."""
    from optbench.results import Results

    results = Results(path, {"machine": MACHINE | {"git_sha": sha, "git_dirty": dirty}, "suites": ["adam"],
                             "config": {"speed": {"params": 4e6}}, "created": f"2026-11-26T07:0{seed}:00"})
    results.extend(timing(rounds(scale, n=40, noise=0.005, seed=seed)))
    results.finish()
    return path


def test_calibrate_from_aa_runs_raises_a_cases_threshold_to_its_spread(tmp_path, capsys):
    """Two A/A runs 8 % apart (drift between runs, which tight rounds cannot see): compare on rounds cannot tell a
    new run 8 % slower from that (unclear: UNDECIDED, exit 3); with the calibration it is within this machine's A/A
    spread (the same), and 20 % slower is a change."""
    a, b = aa_run(tmp_path / "a", 1.0, 1), aa_run(tmp_path / "b", 1.08, 2)
    new, slow = aa_run(tmp_path / "new", 1.08, 3), aa_run(tmp_path / "slow", 1.2, 4)
    assert main(["calibrate", str(a), str(b), "--out", str(tmp_path / "cal.json")]) == 0
    assert "largest 8." in capsys.readouterr().out
    data = json.loads((tmp_path / "cal.json").read_text())
    assert data["cases"][0]["spread"] == pytest.approx(0.08, abs=0.01) and data["runs"] == 2
    assert main(["compare", str(a), str(new)]) == 3  # uncalibrated: one process per run, within 50 %: UNDECIDED
    assert "**UNDECIDED:**" in capsys.readouterr().out
    assert main(["compare", str(a), str(new), "--calibration", str(tmp_path / "cal.json")]) == 0
    assert "A/A spread on this machine" in capsys.readouterr().out
    assert main(["compare", str(a), str(slow), "--calibration", str(tmp_path / "cal.json")]) == 1
    (tmp_path / "bad.json").write_text("{}")
    assert main(["compare", str(a), str(new), "--calibration", str(tmp_path / "bad.json")]) == 2
    assert main(["calibrate", str(a)]) == 2
    err = capsys.readouterr().err
    assert "not an optbench calibration file" in err and "name two or more A/A runs" in err


def test_calibrate_from_the_history_groups_runs_of_one_clean_commit(tmp_path, capsys):
    history = tmp_path / "history"
    for i, (sha, dirty, scale) in enumerate([("abc", False, 1.0), ("abc", False, 1.06), ("abc", True, 1.5),
                                             ("def", False, 2.0)]):
        aa_run(tmp_path / f"run{i}", scale, i + 1, sha, dirty)
        (history / f"{i}.json").parent.mkdir(exist_ok=True)
        (history / f"{i}.json").write_bytes((tmp_path / f"run{i}" / "results.json").read_bytes())
    assert main(["calibrate", "--history", str(history), "--out", str(tmp_path / "cal.json")]) == 0
    data = json.loads((tmp_path / "cal.json").read_text())
    assert data["groups"] == 1 and data["runs"] == 2  # the dirty run and the lone commit left out
    assert data["threshold"] == pytest.approx(0.06, abs=0.01)
    assert main(["calibrate", "--history", str(tmp_path / "none")]) == 2


def anchored_run(drift: float, candidate_scale: float, seed: int, labels=LABELS) -> list[dict]:
    """A run timing a candidate and torch's for-loop in the same rounds, the whole machine ``drift`` slower."""
    loop = dict(labels, impl="for-loop")
    shared = rounds(drift, n=30, noise=0.01, seed=seed)  # what moves both in a round
    own = rounds(1.0, n=30, noise=0.005, seed=seed + 100)
    rows = timing(shared * own * candidate_scale) + timing(shared, labels=loop)
    return rows + [row(labels, check="speed", metric="speed.ratio", value=candidate_scale)]


def test_compare_through_the_anchor_both_runs_timed_cancels_drift_between_runs(tmp_path, capsys):
    """The second run on a machine 10 % slower throughout: on its own times the unchanged candidate reads slower;
    through the for-loop timed in the same rounds it is the same, and 15 % more work in the candidate is flagged."""
    claims = compare.Rule(one_process=0.0)  # the anchoring alone, as if one process per run could tell
    drifted = compare.compare_timings(*tables(tmp_path / "aa", anchored_run(1.0, 1.0, 1), anchored_run(1.1, 1.0, 2)),
                                      claims)
    candidate = drifted[drifted["impl"] == "foreach"].iloc[0]
    assert candidate["verdict"] == "same" and candidate["note"].startswith("anchored on for-loop")
    assert "times alone: 1.1" in candidate["note"]
    loop = drifted[drifted["impl"] == "for-loop"].iloc[0]
    assert loop["verdict"] == "slower" and "the anchor of other cases" in loop["note"]  # its own times, the drift
    alone = compare.compare_timings(*tables(tmp_path / "aa"), compare.Rule(anchored=False, one_process=0.0))
    assert alone[alone["impl"] == "foreach"].iloc[0]["verdict"] == "slower"  # the false alarm anchoring removes
    slower = compare.compare_timings(*tables(tmp_path / "ab", anchored_run(1.0, 1.0, 1), anchored_run(1.1, 1.15, 3)),
                                     claims)
    case = slower[slower["impl"] == "foreach"].iloc[0]
    assert case["verdict"] == "slower" and case["ratio"] == pytest.approx(1.15, abs=0.02)
    by_default = compare.compare_timings(*tables(tmp_path / "ab"))  # one process per run: 15 % is unclear
    assert by_default[by_default["impl"] == "foreach"].iloc[0]["verdict"] == "unclear"
    assert main(["compare", str(tmp_path / "aa" / "a"), str(tmp_path / "aa" / "b"), "--times-alone"]) == 3
    assert "times alone" not in capsys.readouterr().out
