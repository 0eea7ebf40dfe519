"""The prepared GPU check (``optbench gpu-check``, ``.ci/gpu``): its dry run lists every section's command, it
refuses in one line without a GPU, a section that outlives its deadline ends INCOMPLETE with what it finished, and
optbench's Triton kernels compile for a Hopper GPU from their source without one."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from optbench.cli import main
from optbench.cli.gpu_check import SECTIONS, Section, gpu_slug, run_section
from optbench.config import compose_config
from optbench.usage import EXIT_INCOMPLETE

REPO = Path(__file__).parents[1]


def test_dry_run_lists_every_section_and_its_command(capsys, tmp_path):
    assert main(["gpu-check", "--dry-run", "--budget-s", "300", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    for section in SECTIONS:
        assert f"  {section.name} (up to " in out
        if section.scripts:
            assert f"optbench gpu-check --findings {tmp_path / 'out' / section.name}.tsv" in out
            continue
        line = next(ln.strip() for ln in out.splitlines() if f"out_dir={tmp_path / 'out' / section.name}" in ln)
        assert line.startswith("optbench run device=cuda ")
        compose_config(shlex.split(line)[2:])  # every section's overrides compose: no typo waits for a GPU
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


def test_dry_run_of_some_sections(capsys):
    assert main(["gpu-check", "--dry-run", "--only", "speed", "adafactor"]) == 0
    out = capsys.readouterr().out
    assert "2 section(s)" in out and "  suites (" not in out


@pytest.mark.parametrize("args, message", [
    (["--only", "sped"], "unknown section 'sped': did you mean 'speed'?"),
    (["--budget-s", "0"], "need a positive number of seconds"),
    (["--archive", "/nonexistent-folder/x.tgz"], "no folder /nonexistent-folder to write it in"),
    (["--archive", "/"], "is a folder: name the .tgz file"),
    (["--out", "/etc/hostname"], "--out /etc/hostname is a file"),
])
def test_mistakes_are_one_line(args, message, capsys):
    assert main(["gpu-check", "--dry-run", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_refuses_without_a_gpu_in_one_line(capsys, tmp_path):
    assert main(["gpu-check", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "no CUDA device here" in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_ci_script_refuses_without_a_gpu(tmp_path):
    """``.ci/gpu`` as a user runs it: optbench is importable here, so it installs nothing and says why it stops."""
    proc = subprocess.run([str(REPO / ".ci" / "gpu"), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          env={**os.environ, "PYTHON": sys.executable}, timeout=120)
    assert proc.returncode == 2 and "no CUDA device here" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_gpu_names_become_folder_names():
    assert gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert gpu_slug("NVIDIA H200") == "h200"


# a section's process that has begun (a stamped line) and then runs past any deadline; how it meets SIGTERM:
PAST_DEADLINE = {
    "dies": ("", "by signal 15"),  # the default action, before a run could say anything
    "exits": ("signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))", "the cases it finished are kept"),
    "ignores": ("signal.signal(signal.SIGTERM, signal.SIG_IGN)", "by signal 9"),  # killed GRACE_S later
}


class _PastDeadline(Section):
    def command(self, out, case_timeout_s, device="cuda"):
        on_term, _ = PAST_DEADLINE[self.name]
        return [sys.executable, "-c", f"import signal, sys, time\n{on_term}\n"
                                      "print('optbench: a case', flush=True)\ntime.sleep(60)"]


@pytest.mark.parametrize("how", [pytest.param(h, marks=pytest.mark.slow) if h == "ignores" else h  # (slow tier:
                                 for h in sorted(PAST_DEADLINE)])  # the kill after the grace; CI keeps the others)
def test_a_section_past_its_deadline_is_incomplete_whatever_it_makes_of_the_signal(tmp_path, monkeypatch, how):
    """A section's run past its deadline: SIGTERM, SIGKILL where it lingers ``GRACE_S`` more, exit 4 (INCOMPLETE)
    whatever its process made of the signal, never a PASS, its log stamped with where the time went. How
    ``optbench run`` ends on SIGTERM is tests/test_isolation.py's; a stand-in process here, which prints at once: a
    real run may still be importing torch when a short deadline comes on a loaded machine."""
    monkeypatch.setattr("optbench.cli.gpu_check.GRACE_S", 1)  # (the stand-in sleeps 60 s: a stop that fails is seen)
    code, seconds, ended = run_section(_PastDeadline(how, "a run longer than its deadline", (), 1.0), tmp_path,
                                       deadline_s=1, device="cpu")
    assert code == EXIT_INCOMPLETE and seconds < 30, (code, ended)
    assert "deadline" in ended and PAST_DEADLINE[how][1] in ended, ended
    log = (tmp_path / f"{how}.log").read_text()
    assert re.search(r"^\[\s*[0-9.]+ s\] optbench: a case$", log, re.M), log  # stamped: where the time went


def test_triton_kernels_compile_for_hopper_without_a_gpu():
    """Triton's front end and ptxas (in its wheel) build every kernel for sm_90 at each dtype it takes: a kernel that
    would not compile fails here, not on a lent GPU (a first GPU run lost its kernel rows to one such error)."""
    pytest.importorskip("triton")
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from optbench.kernels import adafactor_triton_kernels as dev

    pointers = {"meta": "*i64", "progs": "*i32", "scal": "*fp64"}
    sizes = {"BN": 32, "BM": 128, "BR": 256, "BC": 128, "RB": 64, "BV": 1024, "BLOCK": 1024}
    for dt, acc, part in ((triton.language.float32, triton.language.float32, "*fp32"),
                          (triton.language.float64, triton.language.float64, "*fp64"),
                          (triton.language.bfloat16, triton.language.float32, "*fp32")):
        for name, fn in dev.KERNELS.items():
            consts = {"DT": dt, "ACC": acc, "MUT": 0, **{k: v for k, v in sizes.items() if k in fn.arg_names}}
            signature = {a: "constexpr" if a in consts else pointers.get(a, "i32" if a.startswith("max_") else part)
                         for a in fn.arg_names}
            source = ASTSource(fn=fn, signature=signature,
                               constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()})
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32))
            assert compiled.asm.get("cubin"), name


@pytest.mark.slow  # (slow tier; CI keeps the script's refusal, dry run and a findings section cut short)
def test_the_findings_section_runs_each_cuda_findings_script(tmp_path, capsys):
    """Without a GPU every CUDA finding's script exits 2 (it cannot run): the section says so, and fails (exit 1),
    never reading a script that did not run as a finding that no longer reproduces."""
    from optbench.cli.gpu_check import cuda_findings
    from optbench.report.gpu_check import _findings

    scripts = cuda_findings()
    assert {p.name.split("_")[0] for p in scripts} >= {"F44", "F45", "F46", "F47"}
    code = main(["gpu-check", "--findings", str(tmp_path / "findings.tsv")])
    table = _findings(tmp_path)
    if torch.cuda.is_available():
        assert set(table.exit) <= {0, 1}
    else:
        assert code == 1 and set(table.exit) == {2} and set(table.means) == {"could not run"}, table
    assert len(table) == len(scripts)


def test_a_findings_section_stopped_mid_way_keeps_the_scripts_it_ran(tmp_path, monkeypatch):
    """Its table is written after each script: a section stopped at its deadline (here: interrupted at the second
    script) still reports the first, never "no script ran"."""
    import subprocess

    from optbench.cli import gpu_check

    calls = []

    def run(*args, **kwargs):
        calls.append(args)
        if len(calls) > 1:
            raise KeyboardInterrupt  # as the section's SIGTERM would
        return subprocess.CompletedProcess(args, 1, "", "F44 present: ...")

    monkeypatch.setattr(gpu_check.subprocess, "run", run)
    table = tmp_path / "findings.tsv"
    with pytest.raises(KeyboardInterrupt):
        gpu_check.run_findings(table)
    assert table.read_text().splitlines() == ["F44\t1\tF44 present: ..."]


def test_the_summary_gives_each_section_its_runs_verdict_and_lists_its_failures(tmp_path):
    """A section's verdict is its results' (the rule ``optbench run`` applies), a section without results says its
    log's error line, and every failing row is listed: a FAIL is never summarised as anything else."""
    from optbench.report.gpu_check import summary
    from optbench.results import Results
    from optbench.rows import row

    labels = {"suite": "adam", "impl": "fused", "dtype": "float32", "hparams": "h0", "device": "cuda",
              "workload": "model"}
    Results(tmp_path / "suites", {}, [row(labels, check="parity", metric="max_ulp", value=99.0, status="fail"),
                                      row(labels | {"impl": "foreach"}, check="parity", metric="max_ulp", value=1.0,
                                          status="pass")]).finish()
    from optbench.report.gpu_check import stamped

    # as run_section writes it: each line stamped with its seconds since the section began
    said = stamped("optbench: error: no suite 'adafactr'\n", 1.5)
    (tmp_path / "adafactor.log").write_text("optbench run ...\n" + said)
    sections = [Section("suites", "", (), 1.0), Section("adafactor", "", (), 1.0)]
    machine = {"name": "X", "about": "X", "probe_gib": 1.0, "gb_per_s": 1.0, "probe_kernel": "scale"}
    text = summary(tmp_path, sections, {"suites": (1, 3.0, "finished"), "adafactor": (2, 1.0, "finished")}, machine)
    assert "| suites | 1 | FAIL: 1 case(s) of parity failed |" in text, text
    assert "| adafactor | 2 | optbench: error: no suite 'adafactr' |" in text, text
    assert "Failing, erroring and xpassing cases (1)" in text, text
    assert "| fused  | float32 | h0        | parity  | fail " in text, text
