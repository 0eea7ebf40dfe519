"""A declared process exit (``exits``): code under test that ends the process on some parameters (a C library's
``exit(1)``, bitsandbytes on CUDA at a zero-size parameter) is judged on the rest, and its end is the declared xfail
only where the parent's own plan says so: the status, the last words and the implementation the declaration names."""

import json
from pathlib import Path

import pytest

from tests.conftest import QUICK_TIMING

ROOT = Path(__file__).resolve().parents[1]
CANDIDATE = "tests.candidates.ExitsOnEmptySGD"


def config_dir(tmp_path: Path, impl: str = f"candidate:{CANDIDATE}") -> Path:
    """A user's sgd suite: the built-in one and a declaration that a zero-size parameter's step ends the process."""
    conf = tmp_path / "conf"
    (conf / "suite").mkdir(parents=True)
    text = (ROOT / "suites" / "suite" / "sgd.yaml").read_text().replace("\ndeviations:\n", f"""
deviations:
  - finding: FX1
    impl: "{impl}"
    size: zero
    exits: 1
    stderr: "invalid argument .* fake_ops[.]cu"
    reason: "its kernel is launched with 0 blocks at a zero-size parameter and the library calls exit(1)"
""", 1)
    (conf / "suite" / "sgd.yaml").write_text(text)
    return conf


def run(tmp_path: Path, conf: Path, checks: str = "[parity,deviations]") -> tuple[int, list[dict]]:
    import optbench

    out = tmp_path / "out"
    results = optbench.run(["suite=sgd", f"candidate={CANDIDATE}", "impl=[candidate]", f"checks={checks}",
                            "dtype=float32", "hparams=first", "history_dir=null", "jobs=1", f"out_dir={out}",
                            *QUICK_TIMING[:3], "speed.edge_cases=[zero_size]"], config_dirs=[str(conf)])
    return optbench.exit_code(results), json.loads((out / "results.json").read_text())["rows"]


def deviation_rows(rows: list[dict]) -> list[tuple]:
    return [(r["status"], r["finding"]) for r in rows if r["check"] == "deviation" and r["metric"] != "run.case_s"]


def test_a_declared_exit_is_an_xfail_and_the_rest_is_judged(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPTBENCH_TEST_EXIT", raising=False)
    code, rows = run(tmp_path, config_dir(tmp_path), "[parity,deviations,speed]")
    assert code == 0, [(r["check"], r["status"], r["detail"]) for r in rows if r["status"] not in ("pass", "info")]
    assert deviation_rows(rows) == [("xfail", "FX1")]
    said = next(r["detail"] for r in rows if r["check"] == "deviation")
    assert "still ends the process (exit 1): Error invalid argument at line 7 in file fake_ops.cu" in said
    parity = [r["status"] for r in rows if r["check"] == "parity" and r["metric"] == "parity.max_err_eps"
              and r["status"] != "info"]
    assert parity == ["pass"]  # the zero-size parameter left out, the rest judged
    speed = {r["workload"]: r["status"] for r in rows if r["check"] == "speed" and r["metric"] == "speed.raises"}
    assert speed == {"zero_size": "xfail"}  # not stepped: its timing set would have died with it


@pytest.mark.parametrize("status, says, impl", [
    ("2", "Error invalid argument at line 7 in file fake_ops.cu", None),  # another status
    ("1", "Segmentation fault in fake_ops.cu", None),  # other last words
    ("1", "Error invalid argument at line 7 in file fake_ops.cu", "candidate:tests.candidates.Other"),  # not its
], ids=["another-status", "other-last-words", "declared-for-another-class"])
def test_an_end_the_declaration_does_not_describe_stays_an_error(tmp_path, monkeypatch, status, says, impl):
    monkeypatch.setenv("OPTBENCH_TEST_EXIT", status)
    monkeypatch.setenv("OPTBENCH_TEST_EXIT_SAYS", says)
    conf = config_dir(tmp_path, impl) if impl else config_dir(tmp_path)
    code, rows = run(tmp_path, conf)
    assert code == 1
    died = [r for r in rows if r["metric"] == "case.error" and "exited with code" in r["detail"]]
    # the parameters stepped alone (deviations), or, declared for another class, left in the parity workload
    assert {r["check"] for r in died} == ({"parity"} if impl else {"deviations"}), died
    assert not any(r["status"] == "xfail" for r in rows)


def test_once_it_no_longer_ends_the_process_the_declaration_xpasses(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTBENCH_TEST_EXIT", "0")
    _, rows = run(tmp_path, config_dir(tmp_path))
    assert deviation_rows(rows) == [("xpass", "FX1")]
    assert "no longer ends the process and passes parity" in next(r["detail"] for r in rows
                                                                   if r["check"] == "deviation")


def test_a_case_the_declaration_does_not_stand_for_ending_the_same_way_stays_an_error(tmp_path, monkeypatch):
    """The parent asks its own plan which case a dead worker ran, never the worker: a candidate that ends its
    process with the declared status and words at every step (its parity cases too) gets the xfail only for the
    deviations case of the declared parameters; its parity case is the error a death is, and the run fails."""
    monkeypatch.delenv("OPTBENCH_TEST_EXIT", raising=False)
    monkeypatch.setenv("OPTBENCH_TEST_EXIT_ALWAYS", "1")
    code, rows = run(tmp_path, config_dir(tmp_path))
    assert code == 1
    assert deviation_rows(rows) == [("xfail", "FX1")]
    assert {r["check"] for r in rows if r["metric"] == "case.error" and "exited with code 1" in r["detail"]} == {
        "parity"}


def test_a_declared_exit_names_its_parameters_and_no_raise():
    from omegaconf import OmegaConf

    from optbench.suite.spec import Deviation

    def parsed(**extra):
        return Deviation.from_config(OmegaConf.create({"finding": "FX", "reason": "r", "impl": "candidate:lib.*",
                                                       **extra}))
    assert parsed(size="zero", exits=1, stderr="ops").exits == 1
    for bad, says in (({"exits": 1}, "name the parameters"), ({"size": "zero", "exits": 0}, "not an exit status"),
                      ({"size": "zero", "exits": 1, "raises": "RuntimeError"}, "raises and exits together"),
                      ({"size": "zero", "stderr": "ops"}, "stderr: is the last words"),
                      ({"size": "zero", "exits": True}, "not an exit status"),
                      ({"size": "zero", "exits": 1, "impl": "foreach"}, "declared for candidates only")):
        with pytest.raises(ValueError, match=says):
            parsed(**bad)
