"""A third-party author's first run, from their own working directory: a plain reference module (no package), a
suite file declaring the algorithm's traffic for the roofline, and two classes of one name swept side by side."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).parents[1]
LION = textwrap.dedent('''
    import torch

    class Lion(torch.optim.Optimizer):
        def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

        @torch.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    m = self.state[p].setdefault("exp_avg", torch.zeros_like(p))
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.add_(m.lerp(p.grad, 1 - beta1).sign_(), alpha=-group["lr"]{mutation})
                    m.lerp_(p.grad, 1 - beta2)
''')
SUITE = textwrap.dedent('''
    name: mylion
    optimizer: null
    reference: lion_ref
    dtypes: [float64, float32]
    roofline: {streams: 5}
    hparams:
      - {name: default, options: {}}
      - {name: weight_decay, options: {lr: 3.0e-4, weight_decay: 0.1}}
''')


def project(tmp_path: Path) -> Path:
    """The author's folder: lion_ref.py (a plain module), my_lion.Lion, their_lion.Lion (a wrong one) and the suite."""
    (tmp_path / "lion_ref.py").write_text((REPO / "tests" / "byo" / "lion_reference.py").read_text())
    (tmp_path / "my_lion.py").write_text(LION.replace("{mutation}", ""))
    (tmp_path / "their_lion.py").write_text(LION.replace("{mutation}", " * 1.01"))
    (tmp_path / "conf" / "suite").mkdir(parents=True)
    (tmp_path / "conf" / "suite" / "mylion.yaml").write_text(SUITE)
    return tmp_path


def optbench(cwd: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optbench", "run", "--config-dir", "conf", "suite=mylion",
                           "history_dir=null", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_a_plain_reference_module_and_a_declared_roofline_from_the_working_directory(tmp_path):
    cwd = project(tmp_path)
    done = optbench(cwd, "candidate=my_lion.Lion", "checks=[parity,speed]", "steps=5", "speed.params=1e5",
                    "speed.min_run_time=0.01", "speed.min_rounds=3", "speed.edge_cases=[]", "out_dir=out")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((cwd / "out" / "results.json").read_text())["rows"]
    assert {r["impl"] for r in rows} == {"candidate:my_lion.Lion"}
    per_param = {r["dtype"]: r["value"] for r in rows if r["metric"] == "roofline.bytes_per_param"}
    assert per_param == {"float32": 20.0, "float64": 40.0}  # 5 passes: p r/w, g r, exp_avg r/w
    assert all(r["value"] > 0 for r in rows if r["metric"] == "roofline.pct")
    bad = (cwd / "conf" / "suite" / "mylion.yaml")
    bad.write_text(SUITE.replace("streams: 5", "streams: two"))
    done = optbench(cwd, "candidate=my_lion.Lion", "out_dir=out2")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "roofline" in done.stderr


def test_two_classes_of_one_name_are_told_apart_in_a_sweep(tmp_path):
    cwd = project(tmp_path)
    done = subprocess.run([sys.executable, "-m", "optbench", "run", "-m", "--config-dir", "conf", "suite=mylion",
                           "candidate=my_lion.Lion,their_lion.Lion", "checks=[parity]", "steps=3", "dtype=float64",
                           "history_dir=null", "hydra.sweep.dir=sweep"], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr  # their_lion's update is 1 % too large
    rows = json.loads((cwd / "sweep" / "results.json").read_text())["rows"]
    verdicts = {r["impl"]: r["status"] for r in rows if r["metric"] == "parity.max_err_eps" and not r["fqn"]
                and r["hparams"] == "default"}
    assert verdicts == {"candidate:my_lion.Lion": "pass", "candidate:their_lion.Lion": "fail"}
    assert "candidate:their_lion.Lion" in (cwd / "sweep" / "report.md").read_text()
