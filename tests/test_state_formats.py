"""Converters between torch's, the RFC's name-keyed and DCP's flat optimizer state_dict forms."""

import copy
import io
import math

import pytest
import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)

from optbench.state.by_name import StateDictNameError, load_state_dict_by_name
from optbench.state.formats import (
    as_torch,
    from_flat,
    from_name_keyed,
    optimizer_from_dict,
    to_flat,
    to_name_keyed,
)

FLAT = StateDictOptions(flatten_optimizer_state_dict=True)
FORMS = {"name_keyed": (to_name_keyed, from_name_keyed), "flat": (to_flat, from_flat)}


def assert_same(a, b, path="sd"):
    """Exact equality: same types, dict keys, ints, names, hyperparameters; tensors bit for bit."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{path}: Tensor vs {type(b).__name__}"
        assert (a.dtype, a.shape, a.layout) == (b.dtype, b.shape, b.layout), \
            f"{path}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
        bits = [t.detach().reshape(-1).contiguous().view(torch.uint8) for t in (a, b)]
        assert torch.equal(*bits), f"{path}: tensors differ"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), \
            f"{path}: keys {sorted(map(repr, a))} vs {sorted(map(repr, b))}"
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), f"{path}: {a!r} vs {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    else:
        assert type(a) is type(b), f"{path}: {type(a).__name__} vs {type(b).__name__}"
        assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), f"{path}: {a!r} vs {b!r}"


def saved(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.Linear(4, 4)
        self.mlp = nn.Sequential(nn.Linear(4, 4, bias=False))

    def forward(self, x):
        return self.mlp(torch.tanh(self.attn(x)))


class Nested(nn.Module):  # names like "layers.0.attn.weight"
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class Sparse(nn.Module):  # "tok.emb.weight", sparse gradients for SparseAdam
    def __init__(self):
        super().__init__()
        self.tok = nn.ModuleDict({"emb": nn.Embedding(10, 4, sparse=True)})
        self.pos = nn.Embedding(6, 4, sparse=True)

    def forward(self, x):
        return self.tok["emb"](x) + self.pos(x % 6)


def sequential():
    return nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))  # "0.weight", ...


def adamw_groups(m):
    named = list(m.named_parameters())
    return torch.optim.AdamW([
        {"params": [(n, p) for n, p in named if n.startswith("layers")], "lr": torch.tensor(0.01),
         "betas": (torch.tensor(0.9), torch.tensor(0.99)), "amsgrad": True},
        {"params": [(n, p) for n, p in named if n.startswith("head")], "weight_decay": 0.1}], lr=1e-3)


CASES = {
    "adamw_2groups": (Nested, adamw_groups),
    "sgd_momentum": (sequential, lambda m: torch.optim.SGD(m.named_parameters(), lr=0.1, momentum=0.9)),
    "adafactor": (Nested, lambda m: torch.optim.Adafactor(m.named_parameters())),
    "lbfgs": (sequential, lambda m: torch.optim.LBFGS(m.named_parameters(), lr=0.5, history_size=3, max_iter=3)),
    "sparse_adam": (Sparse, lambda m: torch.optim.SparseAdam(m.named_parameters(), lr=0.01)),
    "nadam": (Nested, lambda m: torch.optim.NAdam(m.named_parameters(), lr=0.01, decoupled_weight_decay=True)),
}


def build(case, seed=0):
    make_model, make_opt = CASES[case]
    torch.manual_seed(seed)
    m = make_model()
    return m, make_opt(m)


def step(m, opt, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 10, (5,), generator=g) if isinstance(m, Sparse) else torch.randn(5, 4, generator=g)

    def closure():
        opt.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    opt.zero_grad()


def trained(case, steps=2):
    m, opt = build(case)
    for s in range(steps):
        step(m, opt, s)
    return m, opt


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("steps", [0, 2])
@pytest.mark.parametrize("case", CASES)
def test_round_trip_is_lossless_through_torch_save(case, steps, form):
    to, back = FORMS[form]
    m, opt = trained(case, steps)
    sd = opt.state_dict()
    converted = saved(to(sd))
    assert_same(back(converted), sd)
    assert_same(as_torch(converted), sd)
    assert as_torch(sd) is sd
    if form == "name_keyed":
        names = [n for g in sd["param_groups"] for n in g["param_names"]]
        assert set(converted["state"]) <= set(names) and all(isinstance(n, str) for g in converted["param_groups"]
                                                                 for n in g["params"])
    else:
        assert all(k.startswith(("state.", "param_groups.")) for k in converted)
    # the converted state resumes training bit for bit
    m2, opt2 = build(case)
    m2.load_state_dict(m.state_dict())
    load_state_dict_by_name(opt2, as_torch(converted, opt2))
    step(m, opt, 7)
    step(m2, opt2, 7)
    assert_same(dict(m2.named_parameters()), dict(m.named_parameters()))
    assert_same(opt2.state_dict(), opt.state_dict())


def test_flat_without_param_names_regroups_by_hyperparameters_or_template():
    m, opt = trained("adamw_2groups")
    sd = opt.state_dict()
    bare = {k: v for k, v in to_flat(sd).items() if not k.endswith(".param_names")}
    assert_same(from_flat(bare), sd)  # distinct hyperparameters: the groups come back exactly
    named = list(m.named_parameters())
    same_hparams = torch.optim.SGD([{"params": named[:2]}, {"params": named[2:]}], lr=0.1, momentum=0.9)
    step(m, same_hparams, 0)
    sd = same_hparams.state_dict()
    bare = {k: v for k, v in to_flat(sd).items() if not k.endswith(".param_names")}
    merged = from_flat(bare)  # equal hyperparameters merge: the documented loss
    assert [g["params"] for g in merged["param_groups"]] == [list(range(len(named)))]
    assert_same(merged["state"], sd["state"])
    assert_same(from_flat(bare, template=same_hparams), sd)
    assert_same(from_flat(bare, template=same_hparams.param_groups), sd)


def test_dotted_state_keys_split_by_known_names():
    t = torch.arange(3.0)
    sd = {"state": {0: {"a.b": t, "step": 3}, 1: {"c": t + 1}},
          "param_groups": [{"lr": 0.1, "param_names": ["x.y.weight", "x.y.bias"], "params": [0, 1]}]}
    flat = to_flat(sd)
    assert "state.x.y.weight.a.b" in flat and "state.x.y.bias.c" in flat
    assert_same(from_flat(saved(flat)), sd)
    assert_same(from_name_keyed(saved(to_name_keyed(sd))), sd)


def test_equality_helper_catches_mutant_converters():
    m, opt = trained("adamw_2groups")
    sd = opt.state_dict()
    flat = to_flat(sd)
    names = sd["param_groups"][0]["param_names"]
    first = names[0]

    def drop_key(f):
        return {k: v for k, v in f.items() if k != f"state.{first}.exp_avg_sq"}

    def swap_names(f):
        a, b = names[0], names[2]  # same shapes: layers.0.attn.weight, layers.0.mlp.0.weight
        swap = {f"state.{a}.": f"state.{b}.", f"state.{b}.": f"state.{a}."}
        return {next((swap[p] + k[len(p):] for p in swap if k.startswith(p)), k): v for k, v in f.items()}

    def flip_bit(f):
        g = dict(f)
        key = f"state.{first}.exp_avg"
        g[key] = torch.nextafter(g[key], torch.full_like(g[key], math.inf))
        return g

    def float_lr(f):
        return {k: (float(v) if k.endswith(".lr") else v) for k, v in f.items()}

    assert_same(from_flat(flat), sd)
    for mutant in (drop_key, swap_names, flip_bit, float_lr):
        with pytest.raises(AssertionError):
            assert_same(from_flat(mutant(flat)), sd)
    nk = to_name_keyed(sd)
    nk["state"][names[0]], nk["state"][names[2]] = nk["state"][names[2]], nk["state"][names[0]]
    with pytest.raises(AssertionError):
        assert_same(from_name_keyed(nk), sd)


def one_line_error(fn, *args, match, **kwargs):
    with pytest.raises(StateDictNameError, match=match) as err:
        fn(*args, **kwargs)
    assert "\n" not in str(err.value)


def test_user_errors_name_the_problem():
    m = sequential()
    unnamed = torch.optim.AdamW(m.parameters())
    for fn in (to_name_keyed, to_flat):
        one_line_error(fn, unnamed.state_dict(), match="no 'param_names'")
    _, opt = trained("sgd_momentum")
    flat = to_flat(opt.state_dict())
    one_line_error(from_flat, {**flat, "optim.0.weight.lr": 0.1}, match="malformed flat key 'optim.0.weight.lr'")
    one_line_error(from_flat, {**flat, "state.2.weight.momentum_buffer": 0}, match="malformed flat key.*2.weight")
    one_line_error(from_flat, {**flat, "state.0.weight": 0}, match="malformed flat key 'state.0.weight'")
    one_line_error(from_flat, {**flat, "param_groups.0.weight.lr": 0.5}, match="share a param group")
    one_line_error(from_flat, {"state.0.weight.step": 1}, match="no 'param_groups")
    bare = {k: v for k, v in flat.items() if not k.endswith("param_names")}
    one_line_error(from_flat, {**bare, "param_groupsx": 1}, match="malformed flat key 'param_groupsx'")
    one_line_error(as_torch, {}, match="not an optimizer state_dict")
    one_line_error(as_torch, 42, match="not an optimizer state_dict")
    one_line_error(from_name_keyed, {"state": {"nope": {}}, "param_groups": [{"params": ["0.weight"]}]},
                   match="no param group lists: nope")
    clash = {"state": {0: {"b.c": 1}, 1: {"c": 2}}, "param_groups": [{"param_names": ["a", "a.b"], "params": [0, 1]}]}
    one_line_error(to_flat, clash, match="same key 'state.a.b.c'")
    ambiguous = {"state.a.b.c": 1, "param_groups.a.lr": 0.1, "param_groups.a.b.lr": 0.1}
    one_line_error(from_flat, ambiguous, match="ambiguous flat key 'state.a.b.c'")


def test_optimizer_from_dict_matches_named_parameters_bit_for_bit():
    torch.manual_seed(0)
    m = Nested()
    with pytest.raises(TypeError, match="one of the params is str"):
        torch.optim.AdamW(dict(m.named_parameters()))  # what the RFC proposes, refused by torch 2.13
    m2 = copy.deepcopy(m)
    ref = adamw_groups(m)
    params = dict(m2.named_parameters())
    built = optimizer_from_dict(torch.optim.AdamW, [
        {"params": {n: p for n, p in params.items() if n.startswith("layers")}, "lr": torch.tensor(0.01),
         "betas": (torch.tensor(0.9), torch.tensor(0.99)), "amsgrad": True},
        {"params": {n: p for n, p in params.items() if n.startswith("head")}, "weight_decay": 0.1}], lr=1e-3)
    for s in range(3):
        step(m, ref, s)
        step(m2, built, s)
    assert_same(dict(m2.named_parameters()), dict(m.named_parameters()))
    assert_same(built.state_dict(), ref.state_dict())
    single = optimizer_from_dict(torch.optim.SGD, dict(m2.named_parameters()), lr=0.1)
    assert single.param_groups[0]["param_names"] == [n for n, _ in m2.named_parameters()]
    for to, back in FORMS.values():
        assert_same(back(saved(to(built.state_dict()))), built.state_dict())
    with pytest.raises(StateDictNameError, match="'head.bias' is in more than one param group"):
        optimizer_from_dict(torch.optim.SGD, [{"params": params}, {"params": {"head.bias": params["head.bias"]}}])
    with pytest.raises(TypeError, match="Mapping"):
        optimizer_from_dict(torch.optim.SGD, list(m.parameters()))


@pytest.mark.parametrize("case", ["adamw_2groups", "sgd_momentum", "adafactor", "nadam"])
def test_to_flat_equals_dcp_flat_state_dict(case):
    m, opt = trained(case)
    dcp = get_optimizer_state_dict(m, opt, options=FLAT)
    mine = to_flat(opt.state_dict())
    assert list(mine) == list(dcp)
    assert_same(mine, dcp)
    assert_same(as_torch(get_optimizer_state_dict(m, opt)), opt.state_dict())  # DCP's nested form too


def test_to_flat_equals_dcp_on_an_unstepped_optimizer_after_dcp_initializes_it():
    m, opt = build("adamw_2groups")
    dcp = get_optimizer_state_dict(m, opt, options=FLAT)  # DCP takes a zero-lr step: state appears, step = 1
    assert all(float(s["step"]) == 1.0 for s in opt.state.values())
    assert_same(to_flat(opt.state_dict()), dcp)


@pytest.mark.parametrize("case", ["adamw_2groups", "sgd_momentum", "adafactor", "nadam"])
def test_dcp_set_accepts_our_flat_like_a_by_name_load(case):
    m, opt = trained(case)
    flat = saved(to_flat(opt.state_dict()))
    m_dcp, opt_dcp = build(case, seed=1)
    m_ours, opt_ours = build(case, seed=1)
    before = copy.deepcopy(dict(m_dcp.named_parameters()))
    set_optimizer_state_dict(m_dcp, opt_dcp, optim_state_dict=flat, options=FLAT)
    load_state_dict_by_name(opt_ours, as_torch(flat, opt_ours))
    assert_same(opt_dcp.state_dict(), opt_ours.state_dict())
    assert_same(opt_dcp.state_dict(), opt.state_dict())
    assert_same(dict(m_dcp.named_parameters()), before)  # DCP's zero-lr initializing step moved nothing


def test_dcp_flat_set_drops_state_when_parameters_hold_grads():
    """F29 (docs/findings/F29_dcp_set_flat_fresh.py): DCP's flat loader rebuilds each parameter's state
    from the keys the target optimizer holds, and skips initializing that state when any .grad exists,
    so the whole saved state is dropped silently; the nested form and as_torch + by-name load keep it."""
    _, opt = trained("adamw_2groups")
    flat = to_flat(opt.state_dict())
    loaded = {}
    for how in ("dcp_flat", "dcp_nested", "ours"):
        m2, opt2 = build("adamw_2groups", seed=1)
        m2(torch.randn(3, 4)).sum().backward()  # gradients present, as after a forward/backward
        if how == "dcp_flat":
            set_optimizer_state_dict(m2, opt2, optim_state_dict=flat, options=FLAT)
        elif how == "dcp_nested":
            set_optimizer_state_dict(m2, opt2, optim_state_dict=to_name_keyed(opt.state_dict()))
        else:
            load_state_dict_by_name(opt2, as_torch(flat))
        loaded[how] = opt2.state_dict()
    assert all(s == {} for s in loaded["dcp_flat"]["state"].values())  # the torch bug this test records
    assert_same(loaded["dcp_nested"]["state"], opt.state_dict()["state"])
    assert_same(loaded["ours"], opt.state_dict())
