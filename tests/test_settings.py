"""The run config is resolved once into read-only, validated settings; nothing that runs a case reads the raw config."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from optbench import checks  # noqa: F401  (registers the built-in checks)
from optbench.checks.registry import check_blocks
from optbench.config import compose_config
from optbench.engine.planner import Planner
from optbench.settings import Block, Settings
from optbench.usage import UsageError

ROOT = Path(__file__).resolve().parents[1]


def settings_of(*overrides: str) -> Settings:
    return Settings.of(compose_config(["suite=sgd", *overrides]), check_blocks())


def test_every_registered_block_and_the_run_blocks_are_settings():
    s = settings_of()
    assert set(check_blocks()) | {"workload", "report"} == set(s.blocks)
    assert s.speed.params == check_blocks()["speed"]["params"]
    assert s.workload.width == 32 and s.workload.grad_log10_range == (-8.0, 2.0)
    assert s.workload.grad_log10_range_by_dtype.float16 == (-2.0, 0.0)
    assert s.check_threads == 1 and s.compile_checks is None


@pytest.mark.parametrize(("override", "message"), [
    ("speed.repeats=abc", "speed.repeats=abc: need a number"),
    ("speed.flush_l2=3", "speed.flush_l2=3: need true or false"),
    ("+speed.paramz=5", "speed.paramz: no such setting (known: params,"),
    ("roundtrip.scenarios=1", "roundtrip.scenarios=1: need a name or a list"),
    ("workload.width=wide", "workload.width=wide: need a number"),
    ("check_threads=[1]", "check_threads=[1]: need a number"),
])
def test_a_mistyped_setting_is_one_line_naming_the_key(override, message):
    with pytest.raises(UsageError) as info:
        settings_of(override)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_settings_are_read_only_and_plain():
    s = settings_of("roundtrip.scenarios=[same_order,reversed]", "reshard.to_ranks=2", "roundtrip.compiled=all")
    assert s.roundtrip.scenarios == ("same_order", "reversed")
    assert s.reshard.to_ranks == (2,)  # one number where the default is a list: a list of one
    assert s.roundtrip.compiled == "all"  # "all" stays the word every block reads as "every one"
    with pytest.raises(AttributeError, match="read-only"):
        s.speed.params = 1
    with pytest.raises(TypeError):
        s.speed["params"] = 1
    with pytest.raises(AttributeError, match="has no setting 'paramz'"):
        _ = s.speed.paramz
    with pytest.raises(AttributeError, match="no settings block 'sped'"):
        _ = s.sped
    assert isinstance(s.workload, Block) and s.workload.to_dict()["grad_log10_range"] == [-8.0, 2.0]


def test_the_planner_hands_the_checks_settings_not_the_config():
    planner = Planner(compose_config(["suite=sgd", "speed.params=1000"]))
    assert not hasattr(planner.ctx, "cfg")
    assert planner.ctx.settings.speed.params == 1000
    assert OmegaConf.is_config(planner.cfg)  # the planner alone holds the composed config


@pytest.mark.parametrize("dtypes, edge_dtypes, timed", [
    ("[float32]", "[float32]", {("float32", "model"), ("float32", "none_grads")}),
    ("float16", "bfloat16", {("float16", "model")}),  # one name is that dtype alone (not a substring of another)
    ("null", "bfloat16",
     {(d, "model") for d in ("float64", "float32", "bfloat16", "float16")} | {("bfloat16", "none_grads")}),
    ("all", "all", {(d, w) for d in ("float64", "float32", "bfloat16", "float16") for w in ("model", "none_grads")}),
    (None, "float32", {("float32", "model"), ("bfloat16", "model"), ("float32", "none_grads")}),  # the default
    ("[float64]", "[]", {("float64", "model")}),
])
def test_speed_times_the_dtypes_it_is_given_and_its_edge_cases_at_theirs(dtypes, edge_dtypes, timed):
    chosen = [] if dtypes is None else [f"speed.dtypes={dtypes}"]
    planner = Planner(compose_config(["suite=adafactor", "checks=[speed]", "impl=[for-loop]", *chosen,
                                      f"speed.edge_dtypes={edge_dtypes}", "speed.edge_cases=[none_grads]"]))
    assert {(case.dtype, case.workload or "model") for _, case in planner.plan()} == timed


@pytest.mark.parametrize("run, timed", [("dtype=float64", {"float64"}), ("dtype=float16", {"float16"})])
def test_a_run_at_a_dtype_speed_dtypes_leaves_out_is_still_timed_at_it(run, timed):
    planner = Planner(compose_config(["suite=adafactor", "checks=[speed]", "impl=[for-loop,foreach]", run,
                                      "speed.edge_cases=[]"]))
    assert {(case.impl_name, case.dtype) for _, case in planner.plan()} == {
        (i, d) for i in ("for-loop", "foreach") for d in timed}


@pytest.mark.parametrize("compile_checks, timed", [("[parity]", {"for-loop", "fused"}),
                                                     ("[parity,speed]", {"for-loop", "fused", "compiled"})])
def test_a_timing_set_holds_the_planned_cases_only(monkeypatch, compile_checks, timed):
    """suite=all's compile_checks leave the compiled variant out of speed: its timing set must not build (and
    compile, 20 s a suite at the timing size) a case the plan left out."""
    from optbench.checks import speed

    planner = Planner(compose_config(["suite=adam", "checks=[speed]", "impl=[for-loop,fused,compiled]",
                                      "dtype=float32", "speed.edge_cases=[]", f"compile_checks={compile_checks}"]))
    plan = planner.plan()
    assert {case.impl_name for _, case in plan} == timed

    class Measured(Exception):
        pass

    def measure(key, members, ctx):
        raise Measured({c.impl_name for c in members})
    monkeypatch.setattr(speed.TimedSet, "measure", measure)
    check, case = plan[0]
    with pytest.raises(Measured) as measured:
        check._timed_set(case, planner.ctx)
    assert measured.value.args[0] == timed


@pytest.mark.parametrize("overrides, compiled", [
    ([], set()),  # suite=all's default: compile_hparams=none, one skip row per suite and dtype, nothing compiled
    (["compile_hparams=[first]"], {("parity", "default"), ("cross", "default")}),
])
def test_suite_all_leaves_the_compiled_variant_out_unless_asked(overrides, compiled):
    planner = Planner(compose_config(["suite=all", "suite.members=[adam]", "checks=[parity,cross,speed]",
                                      "dtype=float32", *overrides]))
    plan = [(check.name, case) for check, case in planner.plan() if case.impl_name == "compiled"]
    assert {(name, case.hset.name) for name, case in plan if not case.skip} == compiled
    if not compiled:
        assert [(name, case.skip[:48]) for name, case in plan] == [
            ("parity", "the compiled variant runs on no hparam set here ")]


@pytest.mark.parametrize("overrides, measured", [
    ([], {"float64", "float32", "bfloat16"}),  # a suite alone: every dtype
    (["memory.dtypes=[float32]"], {"float32"}),
    (["memory.dtypes=[float16]"], {"float64"}),  # none the suite runs: each implementation at its first
])
def test_memory_measures_the_dtypes_it_is_given(overrides, measured):
    planner = Planner(compose_config(["suite=adam", "checks=[memory]", "impl=[for-loop]", *overrides]))
    assert {case.dtype for _, case in planner.plan()} == measured


def test_a_suites_speed_scale_sizes_its_timing_workload():
    """Muon's step is cubic in the width: its speed and memory checks time a model a sixteenth of speed.params."""
    planner = Planner(compose_config(["suite=all", "suite.members=[adam,muon]", "checks=[speed]", "dtype=float32",
                                      "speed.params=4e6"]))
    by_suite = {s.name: s for s in planner.suites}
    sizes = {name: planner.ctx.timing_workload(suite, suite.hparams[0], "float32").numel
             for name, suite in by_suite.items()}
    assert by_suite["muon"].speed_scale == 0.0625 and sizes["adam"] > 3e6 and 1e5 < sizes["muon"] < 4e5, sizes


@pytest.mark.parametrize("edges, timed", [
    ("all", {"model", "noncontiguous", "tiny_tensors", "zero_size", "none_grads"}),
    ("tiny_tensors", {"model", "tiny_tensors"}), ("[]", {"model"})])
def test_speed_edge_cases_all_one_or_none(edges, timed):
    planner = Planner(compose_config(["suite=sgd", "checks=[speed]", "impl=[for-loop]", "dtype=float32",
                                      f"speed.edge_cases={edges}"]))
    assert {case.workload or "model" for _, case in planner.plan()} == timed


# the packages and modules that run cases: they read RunContext.settings, never Hydra's config
CASE_RUNNERS = ["optbench/checks", "optbench/perf", "optbench/numerics", "optbench/state", "optbench/report",
                "optbench/implementations", "optbench/workloads", "optbench/cases.py", "optbench/engine/executor.py"]
COMPOSERS = {"optbench/checks/registry.py"}  # stores the checks' defaults for Hydra to compose (never reads)


def test_nothing_that_runs_a_case_imports_omegaconf():
    found = []
    for place in CASE_RUNNERS:
        path = ROOT / place
        for file in ([path] if path.is_file() else sorted(path.rglob("*.py"))):
            if str(file.relative_to(ROOT)) in COMPOSERS:
                continue
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{file.relative_to(ROOT)}: {n}" for n in names
                          if n.split(".")[0] in ("omegaconf", "hydra")]
    assert not found, found


@pytest.mark.parametrize("selected, measuring", [("[speed]", True), ("[speed,memory,scaling]", True),
                                               ("[parity,speed]", False), ("[parity]", False)])
def test_a_run_of_measuring_checks_alone_is_told_apart(selected, measuring):
    """Such a run prestarts one worker, not ``jobs`` (its cases run one at a time: each worker imports torch and plans
    the run for nothing; on an H200 sixteen did, per worker a new interpreter)."""
    assert Planner(compose_config(["suite=sgd", f"checks={selected}"])).measuring_only() is measuring
