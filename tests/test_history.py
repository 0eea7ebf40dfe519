"""The run history: where runs are recorded, that a copy is exact and never overwrites another run, that a
history problem never costs the run, and reading histories back with filters."""

import re

from optbench.cli import main
from optbench.engine.history import (
    EXTRA,
    list_runs,
    load_history,
    machine_slug,
    read_history,
    record,
    record_quietly,
    run_name,
)
from optbench.results import COLUMNS, Results, row

MACHINE = {"cpu": "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "cpu_threads": 2, "gpu": None,
           "torch": "2.13.0+cpu", "python": "3.11.9", "git_sha": "0123456789abcdef0123"}
LABELS = {"suite": "adam", "optimizer": "Adam", "impl": "foreach", "dtype": "float32", "hparams": "default",
          "device": "cpu", "workload": "model"}


def saved_run(out_dir, created, machine=MACHINE, ms=1.0):
    meta = {"created": created, "machine": machine, "suites": ["adam"],
            "config": {"suite": {"name": "adam"}, "device": {"name": "cpu"}}, "wall_s": 1.5}
    results = Results(out_dir, meta)
    results.extend([row(LABELS, check="speed", metric="time.step_ms", value=ms, unit="ms")])
    return results.finish()


def test_machine_slug_is_readable_and_filesystem_safe():
    assert machine_slug(MACHINE) == "intel-xeon-platinum-8375c-2.90ghz-2t"
    gpu = machine_slug(MACHINE | {"gpu": "NVIDIA H100 80GB HBM3"})
    assert gpu == "intel-xeon-platinum-8375c-2.90ghz-2t-nvidia-h100-80gb-hbm3"
    odd = machine_slug({"cpu": "../weird/\\ name:*?", "cpu_threads": None})
    assert re.fullmatch(r"[a-z0-9.-]+", odd) and ".." not in odd and not odd.startswith(".")


def test_record_is_an_exact_copy_by_machine_and_torch_and_never_overwrites(tmp_path):
    path = saved_run(tmp_path / "run", "2025-05-14T12:03:04+00:00")
    first = record(path, tmp_path / "history")
    assert first.relative_to(tmp_path / "history").as_posix() == (
        "intel-xeon-platinum-8375c-2.90ghz-2t/2.13.0+cpu/20250514T120304Z-01234567-adam-cpu.json")
    assert first.read_bytes() == path.read_bytes()
    again = record(path, tmp_path / "history")  # same second, same commit and suite: a second file, not a clobber
    assert again.name == "20250514T120304Z-01234567-adam-cpu-2.json" and first.is_file()
    assert not [p for p in first.parent.iterdir() if p.name.startswith(".")]  # no temporary file left
    assert run_name({"created": "2025-05-14T14:03:04+02:00", "machine": {}, "suites": ["sgd", "adam"]}) == (
        "20250514T120304Z-nogit-sgd+adam-nodevice")


def test_record_quietly_warns_in_one_line_and_never_raises(tmp_path):
    path = saved_run(tmp_path / "run", "2025-05-14T12:03:04+00:00")
    said = []
    assert record_quietly(path, None, said.append) is None and not said  # history_dir: null
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert record_quietly(path, blocker / "history", said.append) is None
    assert len(said) == 1 and said[0].startswith("optbench: warning: the run was not recorded")


def test_read_history_orders_filters_and_counts_a_run_once(tmp_path):
    history = tmp_path / "history"
    old = saved_run(tmp_path / "old", "2025-05-14T12:00:00+00:00", ms=2.0)
    new = saved_run(tmp_path / "new", "2025-05-15T08:00:00+00:00",
                    MACHINE | {"git_sha": "fedcba98" * 5, "cpu_threads": 8, "torch": "2.14.0"})
    record(new, history)
    record(old, history)
    (history / "notes.json").write_text("{}")  # not a results file: skipped with a warning
    warnings = []
    runs, rows = read_history([history, tmp_path / "old"], warn=warnings.append)  # old twice: its folder and its copy
    assert list(runs["git_sha"]) == ["0123456789abcdef0123", "fedcba98" * 5]  # oldest first
    assert list(rows.columns) == [*COLUMNS, *EXTRA] and len(rows) == 2
    assert list(rows["torch"]) == ["2.13.0+cpu", "2.14.0"] and rows["value"].tolist() == [2.0, 1.0]
    assert len(warnings) == 1 and "notes.json" in warnings[0]
    assert list(load_history([history], torch="2.14")["machine"]) == ["intel-xeon-platinum-8375c-2.90ghz-8t"]
    assert list_runs([history], machine="2.90ghz-2t")["created"].tolist() == ["2025-05-14T12:00:00+00:00"]
    assert list_runs([history], machine="no-such-machine").empty


def test_a_run_is_recorded_in_history_and_a_broken_history_does_not_cost_it(tmp_path, capsys):
    history = tmp_path / "history"
    args = ["run", "suite=sgd", "dtype=float64", "checks=[errors]"]
    assert main([*args, f"out_dir={tmp_path / 'one'}", f"history_dir={history}"]) == 0
    recorded = list(history.glob("*/*/*.json"))
    assert len(recorded) == 1 and recorded[0].read_bytes() == (tmp_path / "one" / "results.json").read_bytes()
    assert re.fullmatch(r"\d{8}T\d{6}Z-([0-9a-f]{8}(\+dirty)?|nogit)-sgd-cpu\.json", recorded[0].name)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    capsys.readouterr()
    assert main([*args, f"out_dir={tmp_path / 'two'}", f"history_dir={blocker}"]) == 0
    out = capsys.readouterr().out
    assert "warning: the run was not recorded" in out and (tmp_path / "two" / "report.md").is_file()


def test_a_run_from_uncommitted_code_is_named_so():
    meta = {"created": "2025-05-14T12:03:04+00:00", "machine": {"git_sha": "b902603a1234", "git_dirty": True},
            "config": {"suite": {"name": "adam"}, "device": {"name": "cpu"}}}
    assert run_name(meta) == "20250514T120304Z-b902603a+dirty-adam-cpu"
    assert (run_name(meta | {"machine": {"git_sha": "b902603a1234", "git_dirty": False}})
            == "20250514T120304Z-b902603a-adam-cpu")
