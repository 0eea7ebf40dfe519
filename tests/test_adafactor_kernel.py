"""optbench's fused CPU Adafactor (optbench.kernels.adafactor) against the float64 reference and torch.

Parity: free-running 10-step trajectories on the same gradients, params and state compared by name after
every step, in eps of the dtype relative to the largest magnitude the reference tensor has had
(optbench.numerics.accuracy.err_eps); ours must be within the tolerance and no worse than torch's own Adafactor.
The reference runs in long double, so that its own float64 rounding is not counted against either.
"""

from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import torch

from optbench.kernels import adafactor as kernel
from optbench.kernels.adafactor import Adafactor
from optbench.numerics.accuracy import err_eps, magnitude, tolerance_eps
from optbench.reference import adafactor as reference

STEPS = 10
DEFAULTS = {"lr": 1e-2, "beta2_decay": -0.8, "eps": (None, 1e-3), "d": 1.0, "weight_decay": 0.0, "maximize": False}
OPTIONS = {
    "default": {},
    "lr_weight_decay": {"weight_decay": 0.1, "lr": 0.05},
    "maximize": {"maximize": True, "weight_decay": 0.1},
    "beta2_decay": {"beta2_decay": -1.0},
    "clipping_d": {"d": 1.5},
    "explicit_eps": {"eps": (1e-30, 1e-2), "lr": 0.05, "beta2_decay": -0.6, "d": 1.5, "weight_decay": 0.02},
}
# 0-dim, one element, a vector, matrices with vector tails and several row blocks, a 3-D stack, a row wider
# than a column block, a column-major matrix, a zero-size vector; grads of "sometimes" are None at steps 3, 6, 9
SHAPES = {"scalar": (), "one": (1,), "vector": (37,), "matrix": (130, 523), "stack": (2, 9, 40), "wide": (3, 9000),
          "column_major": (70, 33), "empty": (0,), "sometimes": (12, 20)}


@pytest.fixture(autouse=True)
def one_thread():
    """Small tensors: one thread is quicker (results do not depend on it: test_bit_identical_...)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def make_params(dtype, names=SHAPES, seed=0):
    gen = torch.Generator().manual_seed(seed)
    params = {}
    for name in names:
        value = torch.randn(SHAPES[name], generator=gen, dtype=torch.float64)
        if name == "column_major":
            value = value.t().contiguous().t()
        params[name] = torch.nn.Parameter(value.to(dtype))
    return params


def gradients(params, step, seed=1):
    gen = torch.Generator().manual_seed(seed * 1000 + step)
    grads = {}
    for name, p in params.items():
        # 1e-4 to 1e-2 (1e-2 to 1: squares of float16 gradients below 6e-8 are zero in its state, for torch too)
        scale = 10.0 ** (torch.randint(-4, -1, (), generator=gen) + 2 * (p.dtype == torch.float16))
        g = torch.randn(p.shape, generator=gen, dtype=torch.float64) * scale
        if name == "sometimes" and step % 3 == 2:
            grads[name] = None
        else:
            grads[name] = (g.t().contiguous().t() if name == "column_major" else g).to(p.dtype)
    return grads


def snapshot(opt, params):
    out = {}
    for name, p in params.items():
        out[(name, "param")] = p.detach().double().numpy().copy()
        for key, value in opt.state.get(p, {}).items():
            out[(name, key)] = value.double().numpy().copy()
    return out


def run(cls, dtype, groups, names=SHAPES, steps=STEPS):
    """Snapshots after each step, the gradients (float64) and the optimizer; groups: [(names, options)]."""
    params = make_params(dtype, names)
    opt = cls([{"params": [params[n] for n in group], **options} for group, options in groups])
    shots, grads = [], []
    for step in range(steps):
        g = gradients(params, step)
        for name, p in params.items():
            p.grad = g[name]
        grads.append({n: None if v is None else v.double().numpy() for n, v in g.items()})
        opt.step()
        shots.append(snapshot(opt, params))
    return shots, grads, opt


def run_reference(dtype, groups, grads, names=SHAPES):
    """The reference on the same gradients, in long double (x87 extended where NumPy has it) so that its
    own rounding (np.mean over axis -2 sums sequentially: ~n float64 eps) does not count as an error."""
    wide = np.longdouble
    params = {n: p.detach().double().numpy().astype(wide) for n, p in make_params(dtype, names).items()}
    hps = {n: {**DEFAULTS, **options, "dtype_eps": torch.finfo(dtype).eps} for group, options in groups for n in group}
    states = {n: reference.init(params[n], hps[n]) for n in params}
    shots = []
    for step_grads in grads:
        for n in params:
            if step_grads[n] is not None:
                params[n], states[n] = reference.update(params[n], step_grads[n].astype(wide), states[n], hps[n])
        shots.append({**{(n, "param"): params[n] for n in params},
                      **{(n, k): np.asarray(v, dtype=wide) for n in params for k, v in states[n].items()}})
    return shots


def errors(shots, ref_shots, eps):
    """Worst error in eps per (name, tensor) over the trajectory; a key only one side has is an inf error."""
    worst, scales = {}, {}
    for mine, ref in zip(shots, ref_shots):
        for key in mine.keys() | ref.keys():
            if key not in mine or key not in ref:
                worst[key] = float("inf")
                continue
            scales[key] = max(scales.get(key, 0.0), magnitude(ref[key]))
            worst[key] = max(worst.get(key, 0.0), err_eps(mine[key], ref[key], eps, scales[key]))
    return worst


def check_parity(cls, dtype, groups, names=SHAPES):
    """Our errors against the reference and torch's on the same gradients (torch without zero-size tensors)."""
    shots, grads, _ = run(cls, dtype, groups, names)
    ours = errors(shots, run_reference(dtype, groups, grads, names), torch.finfo(dtype).eps)
    torch_groups = [([n for n in group if n != "empty"], options) for group, options in groups]
    torch_names = [n for n in names if n != "empty"]
    t_shots, t_grads, _ = run(torch.optim.Adafactor, dtype, torch_groups, torch_names)
    theirs = errors(t_shots, run_reference(dtype, torch_groups, t_grads, torch_names), torch.finfo(dtype).eps)
    return ours, theirs


def assert_parity(ours, theirs):
    """Every tensor within the tolerance and within 1.5 eps of torch's error on it (one tensor's last
    roundings are luck); the worst over all tensors no worse than torch's worst."""
    bad = {k: (v, theirs.get(k)) for k, v in ours.items()
           if not v <= tolerance_eps(STEPS) or (k in theirs and not v <= theirs[k] + 1.5)}
    assert not bad, f"errors in eps (ours, torch's) above tolerance or torch's: {bad}"
    assert max(ours.values()) <= max(theirs.values()), (max(ours.values()), max(theirs.values()))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("options", list(OPTIONS), ids=str)
def test_parity_with_the_reference_no_worse_than_torch(dtype, options):
    ours, theirs = check_parity(Adafactor, dtype, [(list(SHAPES), OPTIONS[options])])
    assert_parity(ours, theirs)


def test_parity_float16_and_two_param_groups():
    groups = [(["matrix", "vector", "empty", "sometimes"], {"weight_decay": 0.1, "maximize": True}),
              (["scalar", "one", "stack", "wide", "column_major"], {"lr": 0.005, "d": 2.0, "beta2_decay": -0.5})]
    for dtype in (torch.float32, torch.float16):
        assert_parity(*check_parity(Adafactor, dtype, groups))


class WrongBeta2(Adafactor):
    """Mutant: the kernel gets beta2_decay - 0.1 (a slower-decaying second moment)."""

    def step(self, closure=None):
        for group in self.param_groups:
            group["beta2_decay"] -= 0.1
        try:
            return super().step(closure)
        finally:
            for group in self.param_groups:
                group["beta2_decay"] += 0.1


class NoClipping(Adafactor):
    """Mutant: update clipping off (the kernel gets d = 1e30, so max(1, RMS(u)/d) is always 1)."""

    def step(self, closure=None):
        saved = [group["d"] for group in self.param_groups]
        for group in self.param_groups:
            group["d"] = 1e30
        try:
            return super().step(closure)
        finally:
            for group, d in zip(self.param_groups, saved):
                group["d"] = d


@pytest.mark.parametrize("mutant", [WrongBeta2, NoClipping], ids=lambda c: c.__name__)
def test_a_wrong_variant_fails_the_parity_check(mutant):
    ours, theirs = check_parity(mutant, torch.float32, [(list(SHAPES), {})])
    with pytest.raises(AssertionError):
        assert_parity(ours, theirs)


def test_state_layout_and_dtypes_are_torchs():
    for dtype in (torch.float32, torch.bfloat16):
        names = [n for n in SHAPES if n != "empty"]
        _, _, ours = run(Adafactor, dtype, [(names, {})], names, steps=2)
        _, _, theirs = run(torch.optim.Adafactor, dtype, [(names, {})], names, steps=2)
        a, b = ours.state_dict(), theirs.state_dict()
        assert a["param_groups"] == b["param_groups"]
        assert a["state"].keys() == b["state"].keys()
        for i, state in a["state"].items():
            assert state.keys() == b["state"][i].keys()
            for key, value in state.items():
                other = b["state"][i][key]
                layout = (value.shape, value.dtype, value.stride())
                assert layout == (other.shape, other.dtype, other.stride()), (i, key)
            assert state["step"].item() == 2.0 and b["state"][i]["step"].item() == 2.0


def test_state_dict_from_torch_continues_as_torch_does():
    names = ["scalar", "vector", "matrix", "stack", "column_major", "sometimes"]
    groups = [(names, {"weight_decay": 0.1, "lr": 0.05})]
    _, _, torch_opt = run(torch.optim.Adafactor, torch.float64, groups, names, steps=3)
    torch_params = torch_opt.param_groups[0]["params"]
    own_params = [torch.nn.Parameter(p.detach().clone()) for p in torch_params]
    own = Adafactor(own_params)
    own.load_state_dict(copy.deepcopy(torch_opt.state_dict()))  # (a state dict shares its tensors)
    for step in range(3, 6):
        g = gradients(dict(zip(names, torch_params)), step)
        for name, p, q in zip(names, torch_params, own_params):
            p.grad = g[name]
            q.grad = None if g[name] is None else g[name].clone()
        torch_opt.step()
        own.step()
    eps = torch.finfo(torch.float64).eps
    for p, q in zip(torch_params, own_params):
        assert err_eps(q.detach().numpy(), p.detach().numpy(), eps) <= tolerance_eps(6)
        for key, value in torch_opt.state[p].items():
            assert err_eps(own.state[q][key].numpy(), value.numpy(), eps) <= tolerance_eps(6), key
    back = torch.optim.Adafactor([torch.nn.Parameter(p.detach().clone()) for p in own_params])
    back.load_state_dict(copy.deepcopy(own.state_dict()))  # and ours loads into torch's
    assert back.state_dict()["state"][0]["step"].item() == 6.0


def test_autograd_sees_every_tensor_the_step_changed():
    """The kernel writes through memory; as torch's in-place steps do, each tensor it changed has its version bumped,
    so a graph that saved a parameter refuses to backpropagate through the value the step overwrote."""
    p, q = torch.nn.Parameter(torch.randn(6, 5)), torch.nn.Parameter(torch.randn(7))
    opt = Adafactor([p, q])
    p.grad, q.grad = torch.randn_like(p), torch.randn_like(q)
    opt.step()
    changed = [p, q, *opt.state[p].values(), *opt.state[q].values()]
    before = [t._version for t in changed]
    loss = (p * p).sum() + (q * q).sum()
    opt.step()
    assert all(t._version > v for t, v in zip(changed, before)), [t._version - v for t, v in zip(changed, before)]
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_loaded_step_of_another_kind_counts_on_and_a_misfit_one_is_refused():
    """A step torch's Adafactor would count on (an integer tensor, as another library may save it) is loaded as the
    float scalar the kernel counts in, its value kept; one set by hand that the kernel cannot count in is refused in
    one line, before anything changes."""
    p = torch.nn.Parameter(torch.randn(4, 3))
    opt = Adafactor([p])
    p.grad = torch.randn_like(p)
    opt.step()
    saved = opt.state_dict()
    saved["state"][0]["step"] = torch.tensor(7)
    opt.load_state_dict(saved)
    opt.step()
    assert opt.state[p]["step"].dtype == torch.float32 and opt.state[p]["step"].item() == 8.0
    opt.state[p]["step"] = torch.tensor([8.0, 8.0])
    before = p.detach().clone()
    with pytest.raises(RuntimeError, match="a step must be a CPU float32 or float64 scalar tensor"):
        opt.step()
    assert torch.equal(p.detach(), before)


def test_zero_size_parameters_get_state_and_step_only():
    shapes = [(0,), (0, 5), (4, 0), (2, 0, 3), (5, 6)]
    params = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
    opt = Adafactor(params, weight_decay=0.1)
    for _ in range(2):
        for p in params:
            p.grad = torch.randn(p.shape)
        opt.step()
    for p, s in zip(params, shapes):
        state = opt.state[p]
        assert state["step"].item() == 2.0
        if len(s) > 1:
            assert state["row_var"].shape == s[:-1] + (1,) and state["col_var"].shape == s[:-2] + (1,) + s[-1:]
        if p.numel() == 0:
            assert all(not torch.any(v) for k, v in state.items() if k != "step")
    assert torch.all(opt.state[params[-1]]["row_var"] > 0)
    with pytest.raises(ZeroDivisionError):  # what torch does (finding F04)
        p = torch.nn.Parameter(torch.zeros(0))
        p.grad = torch.zeros(0)
        torch.optim.Adafactor([p]).step()


def raised(make, step=False):
    try:
        opt = make()
        if step:
            opt.step()
    except Exception as exc:
        return type(exc), str(exc)
    return None


def dense():
    p = torch.nn.Parameter(torch.randn(3, 4))
    p.grad = torch.randn(3, 4)
    return [p]


def complex_param():
    p = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.complex64))
    p.grad = torch.randn(3, 4, dtype=torch.complex64)
    return [p]


def sparse_grad():
    p = torch.nn.Parameter(torch.randn(3, 4))
    p.grad = torch.randn(3, 4).to_sparse()
    return [p]


@pytest.mark.parametrize("options", [{"lr": -1.0}, {"lr": torch.tensor([0.1, 0.2])}, {"beta2_decay": 0.8},
                                     {"eps": (-1e-30, 1e-3)}, {"eps": (None, -1.0)}, {"d": 0.0},
                                     {"weight_decay": -0.1}], ids=str)
def test_bad_arguments_raise_as_torch_does(options):
    ours = raised(lambda: Adafactor(dense(), **options))
    theirs = raised(lambda: torch.optim.Adafactor(dense(), **options))
    assert theirs is not None and ours == theirs


@pytest.mark.parametrize("params", [complex_param, sparse_grad], ids=lambda f: f.__name__)
def test_complex_parameters_and_sparse_gradients_raise_at_step_as_torch_does(params):
    ours = raised(lambda: Adafactor(params()), step=True)
    assert ours is not None and ours == raised(lambda: torch.optim.Adafactor(params()), step=True)


def test_named_parameters_foreach_ignored_and_a_tensor_lr():
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.LayerNorm(5))
    twin = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.LayerNorm(5))
    twin.load_state_dict(model.state_dict())
    x, y = torch.randn(8, 6), torch.randn(8, 5)
    ours = Adafactor(model.named_parameters(), lr=torch.tensor(0.02), foreach=True)
    theirs = torch.optim.Adafactor(twin.named_parameters(), lr=torch.tensor(0.02), foreach=False)
    for _ in range(3):
        for m, opt in ((model, ours), (twin, theirs)):
            opt.zero_grad()
            (m(x) - y).square().mean().backward()
            opt.step()
    assert ours.state_dict()["param_groups"][0]["param_names"] == theirs.state_dict()["param_groups"][0]["param_names"]
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6)
    versions = [p._version for p in model.parameters()]  # in-place updates are seen by autograd, as torch's are
    ours.step()
    assert all(p._version > v for p, v in zip(model.parameters(), versions))


def test_bit_identical_across_runs_and_thread_counts():
    names = ["matrix", "wide", "stack", "vector", "column_major"]
    results = []
    for n in (1, 2, 3, 1):
        torch.set_num_threads(n)
        shots, _, _ = run(Adafactor, torch.float32, [(names, {"weight_decay": 0.1})], names, steps=3)
        results.append(shots[-1])
    for other in results[1:]:
        assert all(np.array_equal(results[0][k], other[k]) for k in results[0])


def test_a_build_failure_is_a_one_line_runtime_error(monkeypatch):
    def fail(**kwargs):
        raise RuntimeError("Error building extension 'x':\n[1/2] c++ ... -c adafactor.cpp\nfatal error: Python.h: "
                           "No such file or directory\nninja: build stopped: subcommand failed.")

    monkeypatch.setattr(kernel, "_BUILT", {})
    monkeypatch.setattr("torch.utils.cpp_extension.load", fail)
    for _ in range(2):  # the second time from the remembered failure
        with pytest.raises(RuntimeError) as info:
            Adafactor(dense())
        assert str(info.value) == ("optbench's Adafactor kernel could not be built: fatal error: Python.h: "
                                   "No such file or directory")


def test_layouts_agree_column_major_stepped_in_place():
    """Column-major parameters (2-D, and 3-D slices) are stepped through their transpose, without a copy;
    with either layout of gradient, every layout's result is within rounding of the row-major one's."""
    gen = torch.Generator().manual_seed(3)
    results = {}
    for shape in ((70, 33), (3, 40, 17)):
        value = torch.randn(shape, generator=gen)
        grads = [torch.randn(shape, generator=gen) * 1e-3 for _ in range(3)]
        for p_cm in (False, True):
            for g_cm in (False, True):
                cm = lambda t: t.transpose(-2, -1).contiguous().transpose(-2, -1)  # noqa: E731
                p = torch.nn.Parameter(cm(value) if p_cm else value.clone())
                storage = p.data_ptr()
                opt = Adafactor([p], weight_decay=0.1)
                for g in grads:
                    p.grad = cm(g) if g_cm else g.clone()
                    opt.step()
                assert p.data_ptr() == storage and p.is_contiguous() == (not p_cm)
                results[shape, p_cm, g_cm] = (p.detach().clone(), {k: v.clone() for k, v in opt.state[p].items()})
        base_p, base_state = results[shape, False, False]
        for key in ((shape, True, True), (shape, True, False), (shape, False, True)):
            q, state = results[key]
            assert err_eps(q.double().numpy(), base_p.double().numpy(), torch.finfo(torch.float32).eps) <= 2, key
            for name, value in base_state.items():
                assert err_eps(state[name].double().numpy(), value.double().numpy(),
                               torch.finfo(torch.float32).eps) <= 2, (key, name)


@pytest.mark.slow  # (slow tier; CI: every test of this file builds or loads the kernel)
def test_a_build_lock_left_by_a_killed_process_does_not_hang_the_next_build(tmp_path):
    """torch guards a JIT build with a plain ``lock`` file, which a process killed mid-build leaves behind; every later
    load waited on it forever (a run stopped by SIGTERM while building hung every later run). optbench's build holds a
    flock, which dies with its holder, and removes a torch lock no one holds: the next build goes on."""
    import shutil
    import subprocess
    import sys

    from torch.utils.cpp_extension import _get_build_directory

    kernel.build()  # the extension as built here, copied (timestamps kept: ninja has nothing to do)
    name = f"optbench_adafactor_{kernel._flags()[0]}"
    copy = tmp_path / name
    shutil.copytree(_get_build_directory(name, verbose=False), copy)
    (copy / "optbench.flock").unlink(missing_ok=True)
    (copy / "lock").touch()  # what a process killed while building leaves
    proc = subprocess.run([sys.executable, "-c", "from optbench.kernels.adafactor import build; build(); print('ok')"],
                          env={**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-2000:]
    assert not (copy / "lock").exists()
