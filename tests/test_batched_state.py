"""Batched state by name: an optimizer that stacks same-shape parameters keeps one state per
bucket under one parameter; reordering same-shape parameters permutes the stacked rows. torch's positional load
gets it wrong (detected, by FQN); ``load_state_dict_by_name`` restores every row to its FQN."""

from __future__ import annotations

import io

import pytest
import torch

import optbench.state.batched as batched_state
from optbench import load_state_dict_by_name
from optbench.kernels import BatchedScaledAdam, ScaledAdam
from optbench.state.batched import per_parameter_state
from optbench.state.positional import _per_name, _whose

NAMES = ["l0.q", "l0.k", "l0.v", "l1.q", "l1.k", "l1.v", "l0.bias", "l1.bias", "scale"]
SHAPES = [(6, 4)] * 6 + [(4,), (4,), ()]
OPTIONS = {"clipping_scale": 1.0, "clipping_update_period": 2, "size_update_period": 2}


def build(cls, order, values):
    params = {n: torch.nn.Parameter(values[n].clone()) for n in order}
    return params, cls(list(params.items()), **OPTIONS)


def steps(params, opt, start, stop):
    for step in range(start, stop):
        gen = torch.Generator().manual_seed(step)
        for n in sorted(params):
            params[n].grad = torch.randn(params[n].shape, generator=gen, dtype=params[n].dtype)
        opt.step()


def saved(opt) -> dict:
    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def by_fqn(params, opt) -> dict:
    states = per_parameter_state(opt)
    return {n: states.get(p, {}) for n, p in params.items()}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a)


@pytest.fixture
def values():
    gen = torch.Generator().manual_seed(0)
    return {n: torch.randn(s, generator=gen, dtype=torch.float64) for n, s in zip(NAMES, SHAPES)}


# the same-shape q/k/v of each layer listed in another order (a refactor), everything else in place
SWAPPED = ["l1.v", "l0.v", "l1.k", "l0.q", "l1.q", "l0.k", "l0.bias", "l1.bias", "scale"]


def test_positional_load_permutes_stacked_rows_and_the_check_names_whose_state_each_fqn_got(values):
    params, opt = build(BatchedScaledAdam, NAMES, values)
    steps(params, opt, 0, 5)
    sd = saved(opt)
    params2, opt2 = build(BatchedScaledAdam, SWAPPED, {n: p.detach() for n, p in params.items()})
    opt2.load_state_dict(sd)  # torch: by position
    mine, theirs = _per_name(opt2, params2), _per_name(opt, params)
    wrong = {n: _whose(mine[n][0], theirs) for n in NAMES if not same(mine[n][0], theirs[n][0])}
    assert set(wrong) == {"l0.q", "l0.k", "l0.v", "l1.q", "l1.k", "l1.v"}
    # the stack landed under l1.v, the new holder: its rows in the saved order
    assert wrong["l1.v"] == "got l0.q's state" and wrong["l0.v"] == "got l0.k's state"


def test_by_name_restacks_rows_to_their_fqns_and_continues_bit_for_bit(values):
    params, opt = build(BatchedScaledAdam, NAMES, values)
    steps(params, opt, 0, 5)
    sd = saved(opt)
    params2, opt2 = build(BatchedScaledAdam, SWAPPED, {n: p.detach() for n, p in params.items()})
    load_state_dict_by_name(opt2, sd)
    before, after = by_fqn(params, opt), by_fqn(params2, opt2)
    assert all(same(before[n], after[n]) for n in NAMES)
    holder = opt2.state[params2["l1.v"]]
    assert holder["batch_names"] == [n for n in SWAPPED if n.endswith((".q", ".k", ".v"))]
    steps(params, opt, 5, 9)
    steps(params2, opt2, 5, 9)
    assert all(torch.equal(params[n], params2[n]) for n in NAMES)
    assert all(same(a, b) for a, b in zip(by_fqn(params, opt).values(), [by_fqn(params2, opt2)[n] for n in params]))


def test_without_the_restacking_the_by_name_load_is_wrong(values, monkeypatch):
    """The mutant: by name, but the stacked rows left as saved (only re-keyed): caught."""
    monkeypatch.setattr("optbench.state.by_name.relaid", lambda optimizer, keyed, check=None: keyed)
    params, opt = build(BatchedScaledAdam, NAMES, values)
    steps(params, opt, 0, 5)
    params2, opt2 = build(BatchedScaledAdam, SWAPPED, {n: p.detach() for n, p in params.items()})
    load_state_dict_by_name(opt2, saved(opt))
    before, after = by_fqn(params, opt), by_fqn(params2, opt2)
    assert not all(same(before[n], after[n]) for n in NAMES)


@pytest.mark.parametrize("save_cls, load_cls", [(ScaledAdam, BatchedScaledAdam), (BatchedScaledAdam, ScaledAdam)])
def test_per_tensor_and_batched_load_each_others_state_by_name(values, save_cls, load_cls):
    params, opt = build(save_cls, NAMES, values)
    steps(params, opt, 0, 5)
    params2, opt2 = build(load_cls, SWAPPED, {n: p.detach() for n, p in params.items()})
    load_state_dict_by_name(opt2, saved(opt))
    before, after = by_fqn(params, opt), by_fqn(params2, opt2)
    assert all(same(before[n], after[n]) for n in NAMES)
    steps(params, opt, 5, 9)
    steps(params2, opt2, 5, 9)
    for n in NAMES:  # two kernels: the same math, reductions stacked or not
        torch.testing.assert_close(params2[n], params[n], rtol=1e-12, atol=1e-14)


def test_renamed_rows_follow_the_rename(values):
    params, opt = build(BatchedScaledAdam, NAMES, values)
    steps(params, opt, 0, 3)
    renamed = {f"module.{n}": p.detach() for n, p in params.items()}
    params2, opt2 = build(BatchedScaledAdam, [f"module.{n}" for n in SWAPPED], renamed)
    load_state_dict_by_name(opt2, saved(opt), rename=lambda n: f"module.{n}")
    before, after = by_fqn(params, opt), by_fqn(params2, opt2)
    assert all(same(before[n], after[f"module.{n}"]) for n in NAMES)


def test_group_bookkeeping_moves_to_the_groups_new_first_parameter(values):
    params, opt = build(ScaledAdam, NAMES, values)
    steps(params, opt, 0, 3)
    params2, opt2 = build(ScaledAdam, list(reversed(NAMES)), {n: p.detach() for n, p in params.items()})
    load_state_dict_by_name(opt2, saved(opt))
    assert "clipping" in opt2.state[params2["scale"]] and "clipping" not in opt2.state.get(params2["l0.q"], {})
    assert opt2.state[params2["scale"]]["clipping"]["step"] == 3


def test_unstacked_needs_names():
    sd = {"state": {0: {"batch_names": [None, None], "delta": torch.zeros(2, 3), "step": 1}}, "param_groups": []}
    with pytest.raises(KeyError, match="no parameter names"):
        batched_state.unstacked(sd)
