"""What optbench's by-name loader refuses: every state tensor of the wrong shape (finding F31: a fused
CPU step does not check), state it cannot attribute to a named parameter, another optimizer class's state; and a
refused or failed load leaves the optimizer exactly as it was."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest
import torch

from optbench import load_state_dict_by_name, name_aware
from optbench.kernels import ScaledAdam
from optbench.state.formats import same_value
from optbench.state.names import StateDictNameError


def named(seed: int = 0) -> list[tuple[str, torch.nn.Parameter]]:
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(4, 3))  # 0.weight is (4, 8)
    return list(m.named_parameters())


def stepped(cls, params, steps: int = 2, **options):
    opt = cls(params, **options)
    for _ in range(steps):
        for _, p in params:
            p.grad = torch.randn_like(p)
            if cls is torch.optim.SparseAdam:
                p.grad = p.grad.to_sparse()
        opt.step()
    return opt


def reread(sd: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(sd, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def saved(cls=torch.optim.AdamW, **options) -> dict:
    return reread(stepped(cls, named(), **options).state_dict())


def state_of(sd: dict, name: str) -> dict:
    group = next(g for g in sd["param_groups"] if name in g["param_names"])
    return sd["state"][group["params"][group["param_names"].index(name)]]


def one_line(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message
    return message


# 1. every parameter-shaped state tensor compared whole, ndim included

WRONG = {"more dims": {"exp_avg": (4, 8, 1)}, "flattened": {"exp_avg": (32,)}, "0-dim": {"exp_avg": ()},
         "broadcastable (4, 1)": {"exp_avg": (4, 1)}, "broadcastable (1, 8)": {"exp_avg": (1, 8)},
         "one right, one wrong": {"exp_avg_sq": (8, 4)}, "transposed amsgrad": {"max_exp_avg_sq": (8, 4)}}


@pytest.mark.parametrize("case", sorted(WRONG))
def test_every_state_tensor_of_another_shape_is_refused_naming_the_parameter_and_key(case):
    sd = saved(amsgrad=True)
    for key, shape in WRONG[case].items():
        state_of(sd, "0.weight")[key] = torch.zeros(shape)
    opt = torch.optim.AdamW(named(), lr=0.1, amsgrad=True)
    with pytest.raises(StateDictNameError) as exc:
        load_state_dict_by_name(opt, sd)
    message = one_line(exc)
    assert "0.weight" in message and next(iter(WRONG[case])) in message
    assert not opt.state


@pytest.mark.parametrize("key, shape", [("row_var", (4, 8)), ("col_var", (4, 8)), ("row_var", (1, 8)),
                                        ("col_var", (4, 1)), ("row_var", (4,))])
def test_adafactors_factors_must_have_their_exact_reduced_shape(key, shape):
    sd = saved(torch.optim.Adafactor)
    state_of(sd, "0.weight")[key] = torch.zeros(shape)
    with pytest.raises(StateDictNameError, match=f"0.weight.*{key}"):
        load_state_dict_by_name(torch.optim.Adafactor(named()), sd)


def test_scalar_state_of_another_shape_is_refused():
    sd = saved(torch.optim.ASGD)
    state_of(sd, "0.weight")["eta"] = torch.zeros(4, 8)
    with pytest.raises(StateDictNameError, match="0.weight.*eta"):
        load_state_dict_by_name(torch.optim.ASGD(named()), sd)


OWN_STATE = [(torch.optim.Adafactor, {}), (torch.optim.ASGD, {}), (torch.optim.Rprop, {}), (torch.optim.NAdam, {}),
             (torch.optim.Adagrad, {}), (torch.optim.SGD, {"momentum": 0.9}), (torch.optim.SparseAdam, {}),
             (torch.optim.Adamax, {}), (torch.optim.Adadelta, {}), (torch.optim.RMSprop, {"centered": True}),
             (torch.optim.RAdam, {}), (torch.optim.AdamW, {"amsgrad": True}), (ScaledAdam, {"size_update_period": 5})]


@pytest.mark.parametrize("cls, options", OWN_STATE, ids=[c.__name__ for c, _ in OWN_STATE])
def test_every_optimizers_own_state_still_loads_by_name(cls, options):
    sd = saved(cls, **options)
    params = list(reversed(named()))
    opt = cls(params, **options)
    load_state_dict_by_name(opt, sd)
    for name, p in params:
        assert same_value(dict(opt.state[p]), dict(state_of(sd, name))) or cls is ScaledAdam


def test_muons_momentum_buffer_loads_and_a_wrong_one_is_refused():
    params = [(n, p) for n, p in named() if p.dim() == 2]
    sd = reread(stepped(torch.optim.Muon, params).state_dict())
    load_state_dict_by_name(torch.optim.Muon(params[::-1]), sd)
    state_of(sd, "0.weight")["momentum_buffer"] = torch.zeros(8, 4)
    with pytest.raises(StateDictNameError, match="0.weight.*momentum_buffer"):
        load_state_dict_by_name(torch.optim.Muon(params), sd)


# 2. under strict, state the loader cannot attribute to a named parameter

def test_state_keyed_by_string_ids_is_refused_under_strict_naming_the_keys():
    sd = saved()
    sd["state"] = {str(k): v for k, v in sd["state"].items()}
    with pytest.raises(StateDictNameError, match="'0'") as exc:
        load_state_dict_by_name(torch.optim.AdamW(named()), sd)
    assert "'3'" in one_line(exc)
    opt = torch.optim.AdamW(named())
    load_state_dict_by_name(opt, sd, strict=False)  # not strict: dropped, every parameter starts fresh
    assert not opt.state


def test_state_under_ids_no_group_lists_is_refused_under_strict_naming_them():
    sd = saved()
    sd["state"] = {k + 10: v for k, v in sd["state"].items()}
    with pytest.raises(StateDictNameError, match="10, 11, 12, 13"):
        load_state_dict_by_name(torch.optim.AdamW(named()), sd)
    handle = name_aware(opt := torch.optim.AdamW(named()))
    with pytest.raises(StateDictNameError, match="10, 11, 12, 13"):
        opt.load_state_dict(sd)
    handle.remove()


# 3. transactional: a refused or failed load leaves the optimizer exactly as it was

def snapshot(opt) -> tuple:
    return reread(opt.state_dict()), [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]


def assert_unchanged(opt, before: tuple) -> None:
    sd, groups = before
    assert same_value(reread(opt.state_dict()), sd)
    assert same_value([{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups], groups)


def failing_loads() -> dict:
    """state_dicts torch's own loader fails on after it has begun changing the optimizer, or optbench refuses."""
    no_step = saved()
    del state_of(no_step, "1.bias")["step"]  # Adam's __setstate__ raises KeyError after param_groups are set
    wrong_shape = saved()
    state_of(wrong_shape, "1.bias")["exp_avg_sq"] = torch.zeros(3, 1)
    return {"no step": no_step, "wrong shape": wrong_shape, "SGD's": saved(torch.optim.SGD, momentum=0.9)}


@pytest.mark.parametrize("case", ["no step", "wrong shape", "SGD's"])
@pytest.mark.parametrize("through", ["load_state_dict_by_name", "name_aware"])
def test_a_failed_load_leaves_the_optimizer_exactly_as_it_was(case, through):
    sd = failing_loads()[case]
    opt = stepped(torch.optim.AdamW, named(1), steps=1, lr=0.5, weight_decay=0.3)
    before = snapshot(opt)
    state_objects = {p: s for p, s in opt.state.items()}
    with pytest.raises(KeyError):  # StateDictNameError is one
        if through == "name_aware":
            name_aware(opt)
            opt.load_state_dict(sd)
        else:
            load_state_dict_by_name(opt, sd)
    assert_unchanged(opt, before)
    assert opt.param_groups[0]["lr"] == 0.5 and "momentum" not in opt.param_groups[0]
    assert all(opt.state[p] is s for p, s in state_objects.items())


# 4. another optimizer class's state, naming the foreign keys

def test_another_optimizers_state_is_refused_naming_the_foreign_keys():
    with pytest.raises(StateDictNameError) as exc:
        load_state_dict_by_name(torch.optim.SGD(named(), lr=0.1), saved(torch.optim.AdamW))
    assert all(k in one_line(exc) for k in ("betas", "eps", "amsgrad", "momentum", "nesterov"))
    with pytest.raises(StateDictNameError) as exc:
        load_state_dict_by_name(torch.optim.Adam(named()), saved(torch.optim.SGD, momentum=0.9))
    assert all(k in one_line(exc) for k in ("momentum", "dampening", "nesterov", "betas"))
    with pytest.raises(StateDictNameError, match="lr_decay"):
        load_state_dict_by_name(torch.optim.Adagrad(named()), saved(torch.optim.Adam))


def test_an_older_checkpoint_with_a_schedulers_keys_is_not_foreign():
    sd = saved()
    old = [{k: v for k, v in g.items() if k not in ("decoupled_weight_decay", "fused", "capturable", "maximize")}
           for g in sd["param_groups"]]
    sd["param_groups"] = [{**g, "initial_lr": 0.1} for g in old]  # an LR scheduler's key
    opt = torch.optim.AdamW(named(), lr=0.1)
    load_state_dict_by_name(opt, sd)
    assert opt.param_groups[0]["initial_lr"] == 0.1 and opt.state


def test_a_stepped_optimizers_own_state_keys_decide_per_parameter():
    sd = saved(torch.optim.Adagrad)  # Adagrad has state from construction: step, sum
    for state in sd["state"].values():
        state["momentum_buffer"] = state.pop("sum")
    with pytest.raises(StateDictNameError, match="momentum_buffer"):
        load_state_dict_by_name(torch.optim.Adagrad(named()), sd)


# 5. a fused step never sees a wrong-shaped state through optbench's loader (F31)

SHAPES = [(4, 8, 1), (32,), (1, 8), ()]
CHILD = textwrap.dedent("""
    import sys, torch
    from optbench import load_state_dict_by_name
    from optbench.state.names import StateDictNameError
    for shape in SHAPES:
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(4, 3))
        opt = torch.optim.AdamW(m.named_parameters(), lr=0.1, fused=True)
        m(torch.randn(5, 8)).sum().backward()
        opt.step()
        sd = opt.state_dict()
        sd["state"][0]["exp_avg"] = torch.zeros(shape)
        fresh = torch.optim.AdamW(m.named_parameters(), lr=0.1, fused=True)
        try:
            load_state_dict_by_name(fresh, sd)
        except StateDictNameError as exc:
            print(shape, "refused:", exc, flush=True)
        else:
            print(shape, "loaded", flush=True)
        m(torch.randn(5, 8)).sum().backward()
        fresh.step()  # refused: the fresh optimizer's own state; loaded: the wrong one (heap corruption)
        fresh.step()
        print(shape, "stepped", flush=True)
""")


@pytest.mark.slow  # (slow tier; CI keeps each refusal of the loader, in-process)
def test_a_fused_step_never_sees_a_wrong_shaped_state_through_the_loader():
    """Each wrong shape in one child process (a wrong state reaching the fused kernel corrupts its heap): refused,
    naming the parameter and key, and the fresh optimizer steps on its own state."""
    child = subprocess.run([sys.executable, "-c", CHILD.replace("SHAPES", repr(SHAPES))],
                           capture_output=True, text=True, timeout=120)
    lines = child.stdout.splitlines()
    for shape in map(str, SHAPES):  # as the child prints each
        said = [line[len(shape) + 1:] for line in lines if line.startswith(shape + " ")]
        assert said and said[0].startswith("refused: 0.weight") and "exp_avg" in said[0], (shape, child.stdout,
                                                                                           child.stderr[-2000:])
        assert said[-1] == "stepped", (shape, child.stdout, child.stderr[-2000:])
    assert child.returncode == 0, child.stderr[-2000:]


class Scalars(torch.optim.Optimizer):
    """A third-party optimizer: a scalar (gamma), a parameter-shaped buffer (m), a per-step history (hist, 3,)."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state.update(gamma=torch.tensor(1.0), m=torch.zeros_like(p), hist=torch.zeros(3))
                state["gamma"].mul_(0.9)
                state["m"].add_(p.grad)
                p.add_(state["m"], alpha=-group["lr"] * float(state["gamma"]))


def test_an_unknown_optimizers_state_is_judged_by_its_scalars_and_its_own_state():
    sd = saved(Scalars)
    with pytest.raises(StateDictNameError, match="changed shape: its saved state hist"):
        load_state_dict_by_name(Scalars(named()), sd)  # hist, unknown, into a fresh optimizer: parameter-shaped
    load_state_dict_by_name(stepped(Scalars, named()[::-1], steps=1), sd)  # its own state: hist has 1 dim
    no_hist = {"state": {k: {n: v for n, v in s.items() if n != "hist"} for k, s in sd["state"].items()},
               "param_groups": sd["param_groups"]}
    load_state_dict_by_name(Scalars(named()[::-1]), no_hist)  # gamma: 0-dim for every parameter, a scalar
    state_of(sd, "0.weight")["m"] = torch.zeros(4, 1)
    with pytest.raises(StateDictNameError, match="0.weight changed shape: its saved state m"):
        load_state_dict_by_name(stepped(Scalars, named(), steps=1), sd)
