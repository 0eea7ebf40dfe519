"""load_state_dict_by_name against torch's positional loader (PyTorch #1489)."""

import io

import pytest
import torch

from optbench import load_state_dict_by_name, name_aware
from optbench.state_by_name import StateDictNameError


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))


def trained(m):
    opt = torch.optim.AdamW(m.named_parameters(), lr=0.1)
    for _ in range(3):
        m(torch.randn(5, 4)).sum().backward()
        opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_by_name_attaches_state_to_the_right_parameter_where_torch_does_not():
    m = model()
    sd = trained(m)
    reversed_named = list(reversed(list(m.named_parameters())))
    positional = torch.optim.AdamW(reversed_named, lr=0.1)
    positional.load_state_dict(sd)
    by_name = torch.optim.AdamW(reversed_named, lr=0.1)
    load_state_dict_by_name(by_name, sd)
    saved = {n: sd["state"][i] for n, i in zip(sd["param_groups"][0]["param_names"], sd["param_groups"][0]["params"])}
    for name, p in reversed_named:
        assert torch.equal(by_name.state[p]["exp_avg"], saved[name]["exp_avg"])
    wrong = [n for n, p in reversed_named if positional.state[p]["exp_avg"].shape != saved[n]["exp_avg"].shape
             or not torch.equal(positional.state[p]["exp_avg"], saved[n]["exp_avg"])]
    assert wrong  # torch's positional load misattributes (this is the bug optbench reports)


def test_missing_and_unexpected_names_are_named():
    m = model()
    sd = trained(m)
    named = list(m.named_parameters())
    fewer = torch.optim.AdamW(named[1:], lr=0.1)
    with pytest.raises(StateDictNameError, match="unexpected in the state_dict: 0.weight"):
        load_state_dict_by_name(fewer, sd)
    renamed = torch.optim.AdamW([("extra.weight", named[0][1])] + named[1:], lr=0.1)
    with pytest.raises(StateDictNameError, match="missing from the state_dict: extra.weight"):
        load_state_dict_by_name(renamed, sd)
    load_state_dict_by_name(renamed, sd, strict=False)  # non-strict: the unknown one starts fresh
    assert named[0][1] not in renamed.state and named[1][1] in renamed.state


def test_unnamed_optimizer_is_refused_with_a_hint():
    m = model()
    sd = trained(m)
    with pytest.raises(StateDictNameError, match="named_parameters"):
        load_state_dict_by_name(torch.optim.AdamW(m.parameters(), lr=0.1), sd)


def _saved_exp_avg(sd):
    group = sd["param_groups"][0]
    return {n: sd["state"][i]["exp_avg"] for n, i in zip(group["param_names"], group["params"])}


def test_rename_maps_a_wrapped_models_names_by_mapping_or_callable():
    m = model()
    sd = trained(m)
    saved = _saved_exp_avg(sd)
    wrapped = [(f"module.{n}", p) for n, p in reversed(list(m.named_parameters()))]  # as DDP names them
    opt = torch.optim.AdamW(wrapped, lr=0.1)
    with pytest.raises(StateDictNameError, match="missing from the state_dict: module."):
        load_state_dict_by_name(opt, sd)
    load_state_dict_by_name(opt, sd, rename=lambda n: f"module.{n}")
    assert all(torch.equal(opt.state[p]["exp_avg"], saved[n.removeprefix("module.")]) for n, p in wrapped)
    compiled = [(f"_orig_mod.{n}", p) for n, p in m.named_parameters()]  # as torch.compile names them
    opt = torch.optim.AdamW(compiled, lr=0.1)
    load_state_dict_by_name(opt, sd, rename={n: f"_orig_mod.{n}" for n in saved})
    assert all(torch.equal(opt.state[p]["exp_avg"], saved[n.removeprefix("_orig_mod.")]) for n, p in compiled)
    with pytest.raises(StateDictNameError, match="rename maps two saved parameters to one name: x"):
        load_state_dict_by_name(opt, sd, rename=lambda n: "x")
    with pytest.raises(TypeError, match="mapping or a callable"):
        load_state_dict_by_name(opt, sd, rename=3)


def test_name_aware_makes_torchs_own_load_state_dict_match_by_name_until_removed():
    m = model()
    sd = trained(m)
    saved = _saved_exp_avg(sd)
    reversed_named = list(reversed(list(m.named_parameters())))
    opt = torch.optim.AdamW(reversed_named, lr=0.1)
    handle = name_aware(opt)
    opt.load_state_dict(sd)
    assert all(torch.equal(opt.state[p]["exp_avg"], saved[n]) for n, p in reversed_named)
    handle.remove()  # torch's positional behaviour again: the wrong state (PyTorch #1489)
    opt.load_state_dict(sd)
    assert not all(opt.state[p]["exp_avg"].shape == saved[n].shape and torch.equal(opt.state[p]["exp_avg"], saved[n])
                   for n, p in reversed_named)
    strict = torch.optim.AdamW(reversed_named[1:], lr=0.1)
    name_aware(strict)
    with pytest.raises(StateDictNameError, match="unexpected in the state_dict"):
        strict.load_state_dict(sd)
    with pytest.raises(StateDictNameError, match="named_parameters"):
        name_aware(torch.optim.AdamW(m.parameters(), lr=0.1))
