"""optbench's Triton Adafactor without a GPU: its kernels run in Triton's interpreter (TRITON_INTERPRET=1, set before
triton is imported, so each check is an optbench process of its own, as a user runs it) and are held to the
adafactor suite's reference at the suite's tolerances; the suite's bugs and a tiled kernel's, swapped into the
kernel itself, must each fail. On a GPU the same kernels run compiled (the ``cuda`` test, and ``.ci/gpu``)."""

import json
import os
import subprocess
import sys

import pytest
import torch

pytest.importorskip("triton")  # the test extra installs it (pinned, no torch of its own)

TRITON = "optbench.kernels.adafactor.TritonAdafactor"
# two option sets that reach every option torch's Adafactor takes: per-group lr, weight decay, d and beta2_decay,
# maximize, an explicit eps1 and eps2; the transformer workload has matrices taller than a tile (the column sums
# cross tiles), a 3-D stack, a non-contiguous weight, vectors, a 0-dim and a zero-size parameter
SETS = "[decay_maximize_groups,explicit_eps]"
WORKLOAD = ["workload.layers=1"]  # the interpreter steps a program at a time: one layer of the transformer suffices


def optbench(tmp_path, *args, python=False, timeout=600):
    """``optbench <args>`` (``python``: ``python <args>``) in a process that interprets Triton, in ``tmp_path``."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "OPTBENCH_JOBS": "0", "OPTBENCH_PLOTS": "false",
           "OPTBENCH_HISTORY_DIR": ""}
    command = [sys.executable, *([] if python else ["-m", "optbench"]), *args]
    return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


ALL_DTYPES = ("float64", "float32", "bfloat16", "float16")


@pytest.mark.parametrize("dtypes", [("float32", "float16"),  # in CI: a 32-bit and a 16-bit kernel
                                    pytest.param(ALL_DTYPES, marks=pytest.mark.slow)])
def test_triton_kernel_is_at_parity_in_the_interpreter(tmp_path, dtypes):
    proc = optbench(tmp_path, "run", "suite=adafactor", f"hparams={SETS}",
                    f"candidate={TRITON}", "impl=[candidate]", f"dtype=[{','.join(dtypes)}]", "checks=[parity]",
                    "steps=2", *WORKLOAD, f"out_dir={tmp_path / 'run'}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "run" / "results.json").read_text())["rows"]
    verdicts = {(r["dtype"], r["hparams"]): r["status"] for r in rows
                if r["metric"] == "parity.max_err_eps" and r["fqn"] == ""}
    # explicit_eps is not a float16 configuration (eps1 = 1e-30 squares to 0): the suite leaves it out there
    assert verdicts == {**{(d, "decay_maximize_groups"): "pass" for d in dtypes},
                        **{(d, "explicit_eps"): "pass" for d in dtypes if d != "float16"}}, verdicts


def test_triton_mutants_are_caught_in_the_interpreter(tmp_path):
    """Each of the kernel's mutants, run as ``optbench run suite=adafactor candidate=...`` (one process for all, the
    CLI's main in turn), fails parity at its first step and exits 1; the control passes. One option set that reaches
    every bug."""
    driver = (
        "import json, sys\n"
        "from optbench.cli import main\n"
        "from optbench.mutants.adafactor_triton import BUGS, CONTROLS\n"
        "codes = {name: main(['run', 'suite=adafactor', 'candidate=optbench.mutants.adafactor_triton.' + name,\n"
        "                     'impl=[candidate]', 'dtype=float32', 'checks=[parity]', 'steps=1', 'max_failures=1',\n"
        "                     'options={weight_decay: 0.1, lr: 0.01, d: 1.5}', *WORKLOAD, 'out_dir=' + name])\n"
        "         for name in [*BUGS, *CONTROLS]}\n"
        "print('CODES', json.dumps(codes))\n").replace("WORKLOAD", repr(WORKLOAD))
    proc = optbench(tmp_path, "-c", driver, python=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    codes = json.loads(proc.stdout.split("CODES ", 1)[1])
    from optbench.engine.mutants import detecting
    from optbench.mutants.adafactor_triton import BUGS

    assert codes == {**dict.fromkeys(BUGS, 1), "CorrectTritonAdafactor": 0}, codes
    for name in BUGS:
        rows = json.loads((tmp_path / name / "results.json").read_text())["rows"]
        assert any(c.startswith("parity") for c in detecting(rows)), name


def test_triton_kernel_needs_the_interpreter_on_cpu():
    """Without TRITON_INTERPRET=1, CPU tensors are refused at construction in one line (a suite reports the
    implementation unavailable, saying why)."""
    from optbench.kernels.adafactor import TritonAdafactor

    if os.environ.get("TRITON_INTERPRET"):
        pytest.skip("this process interprets Triton")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        TritonAdafactor([torch.nn.Parameter(torch.ones(3, 4))])


@pytest.mark.cuda
def test_triton_kernel_matches_torch_on_cuda():
    """On a GPU: the compiled kernels against torch's own Adafactor, a few steps, every dtype they take."""
    from optbench.kernels.adafactor import Adafactor

    for dtype in (torch.float64, torch.float32, torch.bfloat16):
        gen = torch.Generator(device="cuda").manual_seed(0)
        shapes = [(300, 700), (4, 33, 65), (1000,), ()]
        ours = [torch.nn.Parameter(torch.randn(s, device="cuda", generator=gen).to(dtype)) for s in shapes]
        theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
        a, b = Adafactor(ours, weight_decay=0.1, d=1.2), torch.optim.Adafactor(theirs, weight_decay=0.1, d=1.2)
        for _ in range(5):
            for p, q in zip(ours, theirs):
                p.grad = torch.randn(p.shape, device="cuda", generator=gen).to(dtype) * 1e-2
                q.grad = p.grad.clone()
            a.step()
            b.step()
        eps = torch.finfo(dtype).eps
        for p, q in zip(ours, theirs):
            assert (p.double() - q.double()).abs().max().item() <= 8 * eps * max(1.0, q.abs().max().item())


def test_the_cached_table_follows_tensors_that_move(monkeypatch):
    """The host side with the launches recorded instead of run: the table addresses each parameter, state tensor and
    gradient where it is now, after a parameter's storage is replaced (``p.data = ...``) and for a transposed
    gradient; a kernel writing through a stale address would corrupt memory."""
    from optbench.kernels import adafactor_triton as host
    from optbench.kernels import adafactor_triton_kernels as dev
    from optbench.kernels.adafactor import TritonAdafactor

    tables = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda meta, *args, **kwargs: tables.append(meta.clone())

    monkeypatch.setattr(host, "kernels", lambda device: {name: Recorder() for name in dev.KERNELS})
    monkeypatch.setattr(dev, "kernels", lambda device: None)  # the constructor's check: Triton may run here
    w = torch.nn.Parameter(torch.randn(6, 5))
    opt = TritonAdafactor([w])
    w.grad = torch.randn(6, 5)
    opt.step()
    column = lambda f: int(tables[-1][f.value])  # noqa: E731  (one tensor: the table is one row)
    assert column(dev.F_P) == w.data_ptr() and column(dev.F_G) == w.grad.data_ptr()
    assert column(dev.F_R) == opt.state[w]["row_var"].data_ptr()
    w.data = w.data.clone()  # the parameter moves: the plan is rebuilt
    w.grad = torch.randn(6, 8)[:, :5]  # rows 8 apart: addressed in place through its strides
    opt.step()
    assert column(dev.F_P) == w.data_ptr() and column(dev.F_G) == w.grad.data_ptr()
    assert (column(dev.F_SGB), column(dev.F_SGN)) == (48, 8)
    w.grad = torch.randn(5, 6).t()  # a strided last dimension: through a contiguous copy
    opt.step()
    assert column(dev.F_G) != w.grad.data_ptr() and (column(dev.F_SGB), column(dev.F_SGN)) == (30, 5)


@pytest.mark.slow  # (slow tier; CI keeps the Triton kernel's parity and mutants)
def test_an_update_does_not_depend_on_the_grouping(tmp_path):
    """A tensor's tile comes from its own shape: stepped in one param group or one group per tensor, every parameter
    and state tensor is bit for bit the same (with tiles sized per group, the round-trip's regrouped and superset
    scenarios differed by rounding)."""
    script = (
        "import torch\n"
        "from optbench.kernels.adafactor import TritonAdafactor\n"
        "def run(grouped):\n"
        "    gen = torch.Generator().manual_seed(0)\n"
        "    ps = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in ((64, 32), (8, 130), (37,))]\n"
        "    opt = TritonAdafactor([{'params': ps}] if grouped else [{'params': [p]} for p in ps], weight_decay=0.1)\n"
        "    for _ in range(2):\n"
        "        for p in ps:\n"
        "            p.grad = torch.randn(p.shape, generator=gen) * 1e-3\n"
        "        opt.step()\n"
        "    return [p.detach().clone() for p in ps] + [t for p in ps for t in opt.state[p].values()]\n"
        "a, b = run(True), run(False)\n"
        "assert all(torch.equal(x, y) for x, y in zip(a, b)), 'differs'\n"
        "print('same')\n")
    proc = optbench(tmp_path, "-c", script, python=True, timeout=300)
    assert proc.returncode == 0 and "same" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
