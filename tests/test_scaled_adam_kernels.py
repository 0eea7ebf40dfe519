"""optbench.kernels.scaled_adam: ScaledAdam per tensor and batched (kernels.batched), against each other,
against values derived by hand from the spec, and the batched variant's stacked state layout."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from optbench.kernels.batched import BATCH_NAMES, BatchedOptimizer, write_back
from optbench.kernels.scaled_adam import BatchedScaledAdam, ScaledAdam

VARIANTS = [ScaledAdam, BatchedScaledAdam]
HP = dict(clipping_scale=0.5, clipping_update_period=4, size_update_period=3)
NONE_GRAD = {"layers.1.k.weight": {2, 5, 8}, "head.bias": {0, 7}}  # steps on which the grad is None


def transformer_params(dtype=torch.float64) -> dict[str, torch.nn.Parameter]:
    shapes = {f"layers.{i}.{n}.weight": (16, 16) for i in range(4) for n in "qkvo"}
    shapes.update({f"layers.{i}.norm.weight": (16,) for i in range(4)})
    shapes.update({"head.bias": (8,), "scale": (), "gain": (1,), "empty": (0, 16)})
    g = torch.Generator().manual_seed(0)
    return {n: torch.nn.Parameter(torch.randn(s, generator=g, dtype=dtype) * 0.5) for n, s in shapes.items()}


def groups(params: dict) -> list[dict]:
    """Two groups, names interleaved so buckets span several places in a group; the zero-size param in
    the middle of the first."""
    first = [n for n in params if n.startswith(("layers.0", "layers.1"))]
    first[3:3] = ["empty", "scale"]
    second = [n for n in params if n not in first]
    return [{"params": [(n, params[n]) for n in first]}, {"params": [(n, params[n]) for n in second], "lr": 1e-2}]


def set_grads(params: dict, step: int) -> None:
    for i, (name, p) in enumerate(params.items()):
        g = torch.Generator().manual_seed(1000 * step + i)
        grad = torch.randn(p.shape, generator=g, dtype=p.dtype) * (1 + 3 * (step % 4 == 1))  # some steps clipped
        p.grad = None if step in NONE_GRAD.get(name, ()) else grad


def run(cls, steps=12, params=None, chunk_bytes="default", **hp):
    params = transformer_params() if params is None else params
    opt = cls(groups(params), **{**HP, **hp})
    if chunk_bytes != "default":
        opt.chunk_bytes = chunk_bytes
    for step in range(steps):
        set_grads(params, step)
        opt.step()
    return params, opt


def by_name(params: dict, opt) -> dict[str, dict]:
    states = opt.per_parameter_state()
    return {n: states[p] for n, p in params.items() if p in states}


@pytest.mark.parametrize("chunk_bytes", ["default", None, pytest.param(1, marks=pytest.mark.slow),
                                         pytest.param(4096, marks=pytest.mark.slow)])  # (slow tier: the batched
# path with its default chunk and unchunked, in CI)
def test_per_tensor_and_batched_agree(chunk_bytes):
    """Same parameters and per-parameter state after 12 steps with clipping and size updates, through
    None grads, scalars, a zero-size param and two groups; whole buckets, one row at a time, or chunks."""
    pa, a = run(ScaledAdam)
    pb, b = run(BatchedScaledAdam, chunk_bytes=chunk_bytes)
    for name in pa:
        torch.testing.assert_close(pb[name], pa[name], rtol=1e-13, atol=1e-15, msg=name)
    sa, sb = by_name(pa, a), by_name(pb, b)
    assert sa.keys() == sb.keys() == {n for n in pa if n != "empty"}
    for name, state in sa.items():
        assert list(sb[name]) == list(state), name
        assert sb[name]["step"] == state["step"] == 12
        for key, value in state.items():
            if key != "step":
                assert sb[name][key].shape == value.shape and sb[name][key].dtype == value.dtype
                torch.testing.assert_close(sb[name][key], value, rtol=1e-12, atol=1e-14, msg=f"{name} {key}")
    # clipping clipped and size updates ran: the comparison above covered both
    for opt, params in ((a, pa), (b, pb)):
        clip = [opt.state[g["params"][0]]["clipping"] for g in opt.param_groups]
        assert [c["step"] for c in clip] == [12, 12] and all(c["num_clipped"] > 0 for c in clip)
        assert by_name(params, opt)["layers.0.q.weight"]["scale_exp_avg_sq"] > 0
    assert pa["empty"].shape == (0, 16)
    torch.testing.assert_close(a.state[pa["layers.0.q.weight"]]["clipping"]["model_norms"],
                               b.state[pb["layers.0.q.weight"]]["clipping"]["model_norms"], rtol=1e-13, atol=0)


@pytest.mark.parametrize("cls", VARIANTS)
def test_parameter_order_does_not_change_a_bit(cls):
    """The group's clipping norm is summed in an order of its own (ascending), so an optimizer over the same
    parameters listed in another order (as after a by-name load into a refactored model) steps them
    bit for bit the same: clipping on, every step past the first period clipped or not by the same c."""
    pa, _ = run(cls)
    pb = transformer_params()
    opt = cls([{**g, "params": g["params"][::-1]} for g in groups(pb)], **HP)
    for step in range(12):
        set_grads(pb, step)
        opt.step()
    for name in pa:
        assert torch.equal(pa[name], pb[name]), name


@pytest.mark.parametrize("cls", VARIANTS)
def test_first_step_by_hand(cls):
    """Step 1 at the defaults (lr 0.03, betas (0.9, 0.98), K = 4): exp_avg_sq / (1 - 0.98) = g^2, so a
    tensor moves by -lr (1 - beta1) rms g / (|g| + eps); a scalar by -lr 0.1 (1 - beta1) g / (|g| + eps),
    then clamped to scalar_max."""
    w = torch.nn.Parameter(torch.full((2, 2), 2.0, dtype=torch.float64))  # rms 2
    s = torch.nn.Parameter(torch.tensor(0.5, dtype=torch.float64))
    top = torch.nn.Parameter(torch.tensor([10.0], dtype=torch.float64))  # at scalar_max
    w.grad = torch.tensor([[1.0, -2.0], [0.5, 0.0]], dtype=torch.float64)
    s.grad, top.grad = torch.tensor(2.0, dtype=torch.float64), torch.tensor([-1.0], dtype=torch.float64)
    opt = cls([w, s, top])
    opt.step()
    state = opt.per_parameter_state()
    delta_w = torch.tensor([[-0.006 / (1 + 1e-8), 0.006 * 2 / (2 + 1e-8)], [-0.006 * 0.5 / (0.5 + 1e-8), 0.0]],
                           dtype=torch.float64)
    torch.testing.assert_close(state[w]["delta"], delta_w, rtol=1e-12, atol=0)
    torch.testing.assert_close(w.detach(), 2.0 + delta_w, rtol=1e-14, atol=0)
    torch.testing.assert_close(state[w]["exp_avg_sq"], torch.tensor([[0.02, 0.08], [0.005, 0.0]], dtype=torch.float64),
                               rtol=1e-14, atol=0)
    torch.testing.assert_close(state[w]["scale_grads"], torch.tensor([-1.0, 0, 0, 0], dtype=torch.float64))  # sum(p g)
    assert state[w]["param_rms"] == 2.0 and state[w]["scale_exp_avg_sq"] == 0.0 and state[w]["step"] == 1
    assert state[w]["param_rms"].shape == state[w]["scale_exp_avg_sq"].shape == ()
    assert set(state[s]) == {"step", "delta", "exp_avg_sq"} and state[s]["delta"].shape == ()
    assert state[s]["exp_avg_sq"].item() == pytest.approx(0.08, rel=1e-14)
    assert state[s]["delta"].item() == pytest.approx(-0.0003 * 2 / (2 + 1e-8), rel=1e-12)
    assert s.item() == pytest.approx(0.5 - 0.0003 * 2 / (2 + 1e-8), rel=1e-14)
    assert state[top]["delta"].item() == pytest.approx(0.0003 / (1 + 1e-8), rel=1e-12)
    assert top.item() == 10.0  # clamped after adding delta (the original clamps before: 10.0003)


@pytest.mark.parametrize("cls", VARIANTS)
def test_size_update_by_hand(cls):
    """K = 1: step 2 learns the scale. A constant p = c (rms c) and g = 1 give scale_grads = 4 c1 and
    scale_exp_avg_sq = (1 - 0.98) (4 c1)^2, so scale_step = -lr 0.1 sqrt(1 - 0.98^2) / (sqrt(0.02) + eps / (4 c1))."""
    w = torch.nn.Parameter(torch.full((2, 2), 2.0, dtype=torch.float64))
    opt = cls([w], size_update_period=1)
    for _ in range(2):
        w.grad = torch.ones(2, 2, dtype=torch.float64)
        opt.step()
    c1 = 2.0 - 0.006 / (1 + 1e-8)  # step 1 as in test_first_step_by_hand
    d1 = c1 - 2.0
    scale_step = -0.003 * math.sqrt(1 - 0.98**2) * (4 * c1) / (math.sqrt(0.02 * (4 * c1) ** 2) + 1e-8)
    # exp_avg_sq = 0.98 * 0.02 + 0.02 = 1 - 0.98^2 = bc2, so v = 1; param_rms is now c1
    d2 = 0.9 * d1 + 0.1 * scale_step * c1 - 0.003 * c1 / (1 + 1e-8)
    state = opt.per_parameter_state()[w]
    assert state["param_rms"].item() == pytest.approx(c1, rel=1e-14)
    assert state["scale_exp_avg_sq"].item() == pytest.approx(0.02 * (4 * c1) ** 2, rel=1e-13)
    torch.testing.assert_close(state["delta"], torch.full((2, 2), d2, dtype=torch.float64), rtol=1e-12, atol=0)
    torch.testing.assert_close(w.detach(), torch.full((2, 2), c1 + d2, dtype=torch.float64), rtol=1e-14, atol=0)


def test_batched_layout_and_views():
    params, opt = run(BatchedScaledAdam, steps=2)
    first, second = opt.param_groups
    holders = {id(p) for g in opt.param_groups for b in opt.buckets(g) for p in [g["params"][b[0]]]}
    assert {id(p) for p in opt.state} == holders  # each group's first param is a holder here
    g0 = {n: p for n, p in zip(first["param_names"], first["params"])}
    q = opt.state[g0["layers.0.q.weight"]]
    assert q[BATCH_NAMES] == [f"layers.{i}.{n}.weight" for i in (0, 1) for n in "qkvo"]
    assert q["step"] == 2 and q["delta"].shape == q["exp_avg_sq"].shape == (8, 16, 16)
    assert q["param_rms"].shape == q["scale_exp_avg_sq"].shape == (8,) and q["scale_grads"].shape == (8, 3)
    assert set(q["clipping"]) == {"step", "model_norms", "threshold", "num_clipped"}
    scalar = opt.state[g0["scale"]]
    assert scalar[BATCH_NAMES] == ["scale"] and scalar["delta"].shape == (1,) and set(scalar) == {
        BATCH_NAMES, "step", "delta", "exp_avg_sq"}
    assert g0["empty"] not in opt.state
    g1 = {n: p for n, p in zip(second["param_names"], second["params"])}
    assert opt.state[g1["layers.2.norm.weight"]][BATCH_NAMES] == ["layers.2.norm.weight", "layers.3.norm.weight"]
    assert opt.buckets(first) == [[0, 1, 2, 5, 6, 7, 8, 9], [4], [10, 11]]  # "empty" (3) in none
    views = opt.per_parameter_state()
    k1 = views[g0["layers.1.k.weight"]]  # row 5 of its bucket
    assert k1["delta"].data_ptr() == q["delta"][5].data_ptr() and k1["scale_grads"].shape == (3,)
    k1["exp_avg_sq"].fill_(7.0)
    k1["param_rms"].fill_(3.0)
    assert (q["exp_avg_sq"][5] == 7.0).all() and q["param_rms"][5] == 3.0 and (q["exp_avg_sq"][4] != 7.0).any()
    assert "clipping" not in views[g0["layers.0.q.weight"]] and BATCH_NAMES not in k1


def test_names_from_parameters_names_or_none():
    ps = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))]
    for names, expected in ((None, [None, None]), ([["a", "b"]], ["a", "b"])):
        opt = BatchedScaledAdam(ps, parameters_names=names)
        for p in ps:
            p.grad = torch.ones(3)
        opt.step()
        assert opt.state[ps[0]][BATCH_NAMES] == expected
    with pytest.raises(ValueError):
        BatchedScaledAdam(ps, parameters_names=[["a"]])


@pytest.mark.parametrize("cls", VARIANTS)
def test_state_dict_round_trip_continues_bit_identically(cls):
    params, opt = run(cls, steps=6)
    saved = copy.deepcopy(opt.state_dict())
    fresh = {n: torch.nn.Parameter(p.detach().clone()) for n, p in params.items()}
    for step in range(6, 12):
        set_grads(params, step)
        opt.step()
    loaded = cls(groups(fresh), **HP)
    loaded.load_state_dict(saved)
    if cls is BatchedScaledAdam:
        holder = loaded.param_groups[0]["params"][0]
        assert loaded.state[holder][BATCH_NAMES] == saved["state"][0][BATCH_NAMES]  # strings, not generators
    assert loaded.state[loaded.param_groups[1]["params"][0]]["clipping"]["step"] == 6
    for step in range(6, 12):
        set_grads(fresh, step)
        loaded.step()
    for name in params:
        assert torch.equal(fresh[name], params[name]), name
    want, got = by_name(params, opt), by_name(fresh, loaded)
    for name, state in want.items():
        for key, value in state.items():
            assert torch.equal(got[name][key], value) if key != "step" else got[name][key] == value, (name, key)


def test_positional_load_into_swapped_order_permutes_rows():
    """torch's positional load_state_dict into a BatchedScaledAdam built with two same-shape parameters in
    the other order: the stacked state lands under the new holder with its rows in the old order, so
    each parameter silently gets the other's state (what optbench's round-trip check detects)."""
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(4, 4)), torch.nn.Parameter(torch.randn(4, 4) * 3)
    opt = BatchedScaledAdam([("a", a), ("b", b)])
    for _ in range(3):
        a.grad, b.grad = torch.randn(4, 4), torch.randn(4, 4) * 10
        opt.step()
    before = {n: {k: v.clone() if torch.is_tensor(v) else v for k, v in s.items()}
              for n, s in zip("ab", (opt.per_parameter_state()[a], opt.per_parameter_state()[b]))}
    swapped = BatchedScaledAdam([("b", b), ("a", a)])
    swapped.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert swapped.state[b][BATCH_NAMES] == ["a", "b"]  # under b, the new holder, rows still a's then b's
    after = swapped.per_parameter_state()
    for mine, other in ((a, "b"), (b, "a")):
        for key, value in before[other].items():
            assert torch.equal(after[mine][key], value) if torch.is_tensor(value) else after[mine][key] == value
    assert not torch.equal(before["a"]["exp_avg_sq"], before["b"]["exp_avg_sq"])


@pytest.mark.parametrize("cls", VARIANTS)
def test_dtype_errors_and_arguments(cls):
    w = torch.nn.Parameter(torch.randn(3, 5))
    z = torch.nn.Parameter(torch.empty(0))
    opt = cls([z, w], clipping_scale=1.0)
    w.grad = torch.randn(3, 5)
    opt.step()
    state = opt.per_parameter_state()
    assert z not in state and all(v.dtype == torch.float32 for v in state[w].values() if torch.is_tensor(v))
    assert opt.state[z]["clipping"]["model_norms"].dtype == torch.float32  # the group's first param keeps it
    w.grad = torch.randn(3, 5).to_sparse()
    with pytest.raises(RuntimeError, match="ScaledAdam does not support sparse gradients"):
        opt.step()
    c = torch.nn.Parameter(torch.randn(2, dtype=torch.complex64))
    with pytest.raises(RuntimeError, match="ScaledAdam does not support complex parameters"):
        cls([c]).step()
    for bad in (dict(lr=-1), dict(betas=(0.9, 1.0)), dict(betas=(-0.1, 0.9)), dict(eps=-1), dict(size_update_period=0),
                dict(clipping_update_period=0), dict(param_min_rms=4.0), dict(clipping_scale=0.0)):
        with pytest.raises(ValueError):
            cls([w], **bad)


def test_batched_base_is_generic():
    """kernels.batched knows nothing of ScaledAdam: a few-line SGD-with-momentum steps through it."""

    class Momentum(BatchedOptimizer):
        def __init__(self, params):
            super().__init__(params, dict(lr=0.1))

        @torch.no_grad()
        def step(self):
            for group in self.param_groups:
                for batch in self.batches(group, lambda p: {"buf": torch.zeros_like(p)}):
                    buf = batch.rows["buf"].mul_(0.9).add_(batch.stack(batch.grads))
                    write_back(batch.params, batch.stack(batch.params).sub_(buf, alpha=group["lr"]))

    ps = [torch.nn.Parameter(torch.ones(2, 2) * i) for i in range(3)]
    opt = Momentum(ps)
    opt.chunk_bytes = 16  # one row per chunk
    for p in ps:
        p.grad = torch.ones(2, 2)
    opt.step()
    opt.step()
    assert list(opt.state) == [ps[0]] and opt.state[ps[0]]["buf"].shape == (3, 2, 2)
    for i, p in enumerate(ps):
        torch.testing.assert_close(p.detach(), torch.full((2, 2), i - 0.1 - 0.19))


def test_positional_load_into_other_buckets_raises_at_the_step():
    """A bucket's stacked state loaded under a parameter whose bucket has another size: no per-parameter
    state is shown for it, and the next step raises instead of stepping the wrong rows."""
    a, b, c = (torch.nn.Parameter(torch.randn(*s)) for s in ((4, 4), (4, 4), (3,)))
    opt = BatchedScaledAdam([("a", a), ("b", b), ("c", c)])
    for p in (a, b, c):
        p.grad = torch.randn_like(p)
    opt.step()
    moved = BatchedScaledAdam([("c", c), ("a", a), ("b", b)])
    moved.load_state_dict(copy.deepcopy(opt.state_dict()))  # a's two rows now under c, c's one row under b
    assert c not in moved.per_parameter_state()
    with pytest.raises(RuntimeError, match="does not have its bucket's 1 rows"):
        moved.step()


def test_chunks_never_leave_a_row_alone():
    """On CPU a bucket is stepped in chunks of rows; torch sums a lone row (a single-output reduction,
    split across threads) in another order than a row among others, so a last single row joins the chunk
    before it and a row's reductions (scale_grads, param_rms) do not depend on where it is stacked."""
    g = torch.Generator().manual_seed(0)
    start = [torch.randn(256, 256, generator=g) for _ in range(3)]  # rows of 64Ki elements: split when alone
    grads = [[torch.randn(256, 256, generator=g) for _ in range(3)] for _ in range(3)]
    results = []
    for order in ([0, 1, 2], [2, 1, 0]):
        ps = [torch.nn.Parameter(start[i].clone()) for i in order]
        opt = BatchedScaledAdam(ps, size_update_period=1)
        opt.chunk_bytes = 2 * 256 * 256 * 4  # two rows a chunk: (0, 3), not (0, 2) + (2, 3)
        assert opt._chunks(ps) == [(0, 3)] and opt._chunks(ps * 2) == [(0, 2), (2, 4), (4, 6)]
        for step in range(3):
            for p, i in zip(ps, order):
                p.grad = grads[step][i]
            opt.step()
        state = opt.per_parameter_state()
        results.append({i: (p, state[p]) for p, i in zip(ps, order)})
    for i in range(3):
        (pa, sa), (pb, sb) = results[0][i], results[1][i]
        assert torch.equal(pa, pb) and all(torch.equal(sa[k], sb[k]) for k in sa if k != "step"), i


class _ScaleGradsOffByOnePpb(ScaledAdam):
    """scale_grads off by a relative 1e-9: within what a declared error scale could hide, were it too loose."""

    @staticmethod
    def _update(p, g, s, t, group):
        from optbench.kernels.scaled_adam import update

        out = update(p, g, s, t, group)
        if "scale_grads" in s:
            s["scale_grads"][:, t % group["size_update_period"]] *= 1 + 1e-9
        return out


def test_declared_error_scale_still_catches_a_wrong_cancelling_sum(tmp_path):
    """The reference declares that scale_grads (a sum whose terms cancel) rounds with the sum of its terms'
    magnitudes (docs/tolerances.md); a relative 1e-9 error in it still fails parity at float64."""
    from tests.test_cli import rows, run

    code = run(tmp_path, "suite=scaledadam", f"candidate={__name__}._ScaleGradsOffByOnePpb",
               "impl=[candidate,for-loop]", "dtype=float64", "checks=[parity]", "options={}", "steps=4")
    assert code == 1
    failed = [r for r in rows(tmp_path) if r["status"] == "fail"]
    assert failed and all(r["impl"].startswith("candidate:") for r in failed)
    assert any("step 1" in r["detail"] and "/scale_grads" in r["detail"] for r in failed)
