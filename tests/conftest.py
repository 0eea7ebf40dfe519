import os

import pytest
import torch

TEST_DEFAULTS = {
    # test runs are not history: a test that wants one passes history_dir= itself
    "OPTBENCH_HISTORY_DIR": "",
    # cases in the test's own process (jobs=0): a worker process costs seconds to start, and isolation, parallelism
    # and resume have their own tests (tests/test_isolation.py), which pass jobs= themselves
    "OPTBENCH_JOBS": "0",
    # reports without their PNG plots (about 0.7 s a run): the tests that look at plots pass report.plots=true
    "OPTBENCH_PLOTS": "false",
}
for _name, _value in TEST_DEFAULTS.items():
    os.environ.setdefault(_name, _value)


def users_environment(**extra: str) -> dict:
    """This environment without the tests' defaults above, plus ``extra``: a command run as a user runs it (the
    benchmarks: with OPTBENCH_JOBS=0 every case would run in the command's own process, one at a time)."""
    return {**{k: v for k, v in os.environ.items() if k not in TEST_DEFAULTS}, **extra}


# Modules whose tests run whole optbench processes for 5-25 s each: collected first, so pytest-xdist hands them out
# at the start and the run does not end on one worker finishing a long test while the other idles.
LONG_FIRST = ("test_isolation.py", "test_sweep.py", "test_reshard.py", "test_gate.py", "test_bring_your_own.py")


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.path.name not in LONG_FIRST)  # stable: the same order on every worker
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


# Timing at a size that is cheap to step, for the tests that run the speed and memory checks only in passing
# (the checks themselves are tested at their defaults' scale in tests/test_performance.py and tests/benchmarks).
QUICK_TIMING = ["speed.params=2e4", "speed.min_rounds=3", "speed.probe_run_time=0.005",
                "speed.edge_cases=[noncontiguous]"]


def run_inline(args: list[str]) -> int:
    """``main(["run", *args])`` through ``optbench.run``: the same run, result files, verdict line, one-line error
    and exit code, without Hydra's app and its two more compositions of the config (40% of a small run's time).
    The command itself is tested where its own behaviour is the subject (tests/test_cli.py, the console script)."""
    import optbench
    from optbench.usage import UsageError, fail

    try:
        results = optbench.run(args)
    except UsageError as exc:
        return fail(str(exc))
    print("verdict:", results.verdict)
    return optbench.exit_code(results)



def library_parity(tmp_path, suite: str, candidate: str, hparams: str, steps: int = 10) -> tuple[int, list[dict]]:
    """A third-party class's parity on one hparam set at float32, in this process: (exit code, result rows)."""
    import json

    code = run_inline([f"suite={suite}", f"candidate={candidate}", "impl=[candidate]", "checks=[parity]",
                       "dtype=float32", f"steps={steps}", f"hparams=[{hparams}]", "jobs=0", "history_dir=null",
                       f"out_dir={tmp_path}"])
    return code, json.loads((tmp_path / "results.json").read_text())["rows"]


def assert_only_declared_findings(tmp_path, suite: str, candidate: str, hparams: str, findings: set,
                                  steps: int = 10) -> None:
    """Every tensor outside a declared finding is judged at full tolerance (the case passes, or is an xfail where
    ``findings`` show), and each declared finding still shows (an xpass means the library fixed it: its
    declaration then goes)."""
    code, rows = library_parity(tmp_path, suite, candidate, hparams, steps)
    verdicts = [r["status"] for r in rows if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""]
    shown = {r["finding"] for r in rows if r["check"] == "deviation" and r["status"] == "xfail"}
    assert code == 0 and verdicts == (["xfail"] if findings else ["pass"]) and shown == findings, (
        [r["detail"][:200] for r in rows if r["status"] in ("fail", "error", "xpass")], shown)
