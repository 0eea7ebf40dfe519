"""Speed and memory measurement: the roofline model, the ceilings, the timing method, peak memory, the
timing workloads and the scaling check. No timing targets here (those are in tests/benchmarks); where a
test compares timings, the difference it looks for is made far larger than any noise."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch

from optbench.perf import ceilings, roofline
from optbench.perf.peak_memory import peak_transient_bytes
from optbench.perf.timing import measure
from optbench.workloads import speed
from tests.conftest import run_inline

CPU = torch.device("cpu")
FAST = ["speed.params=2e4", "speed.min_run_time=0.01", "speed.min_rounds=3", "speed.probe_run_time=0.005"]


def stepped(cls, shapes, dtype=torch.float32, **options):
    params = [torch.nn.Parameter(torch.randn(s, dtype=dtype)) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = cls(params, **options)
    opt.step()
    return opt


@pytest.mark.parametrize("cls, options, per_param", [
    (torch.optim.SGD, {}, 12), (torch.optim.SGD, {"momentum": 0.9}, 20), (torch.optim.Adam, {}, 28),
    (torch.optim.AdamW, {"amsgrad": True}, 36), (torch.optim.RMSprop, {"momentum": 0.9, "centered": True}, 36),
    (torch.optim.Adagrad, {}, 20), (torch.optim.Rprop, {}, 28)])
def test_roofline_documented_bytes_per_param(cls, options, per_param):
    opt = stepped(cls, [(64, 32), (32,)], **options)
    assert roofline.step_cost(cls.__name__, opt.param_groups).bytes_per_param == per_param


@pytest.mark.parametrize("name", sorted(set(roofline.STREAMS) - {"Adafactor", "Muon"}))
def test_roofline_state_passes_match_the_state_torch_keeps(name):
    """The model's state passes are torch's parameter-sized state tensors, each read and written once."""
    cls = getattr(torch.optim, name)
    options = {"momentum": 0.9} if name == "SGD" else {}
    opt = stepped(cls, [(48, 16), (16,)], **options)
    for p in (p for g in opt.param_groups for p in g["params"]):
        full = sum(1 for v in opt.state[p].values() if torch.is_tensor(v) and v.shape == p.shape)
        cost = roofline.step_cost(name, [{**opt.param_groups[0], "params": [p]}])
        assert cost.bytes == (3 + 2 * full) * p.numel() * 4, (name, tuple(p.shape))


def test_roofline_counts_a_quantized_candidates_state_at_what_it_keeps():
    """An 8-bit optimizer's state passes at a code byte and a float32 scale per block where it quantizes (the spec's
    ``quantized`` block: at least ``min_size`` elements), the parameter's own size elsewhere; its parameter and
    gradient passes unchanged; a declared (suite) model too."""
    from types import SimpleNamespace

    from optbench.adapters.quantized import parse
    from optbench.perf.case_timing import quantized_state_bytes

    opt = stepped(torch.optim.AdamW, [(64, 64), (32,)])
    spec = SimpleNamespace(extra={"quantized": parse({"scheme": "blockwise_8bit", "blocksize": 256, "min_size": 4096,
                                                      "moments": {"exp_avg": ["a", "b", "c"]}}, "spec")})
    case = SimpleNamespace(impl=SimpleNamespace(spec=spec, is_candidate=True))
    cost = roofline.step_cost("AdamW", opt.param_groups, state_bytes=quantized_state_bytes(case))
    assert cost.bytes == 3 * 4096 * 4 + 4 * 4096 * (1 + 4 / 256) + 7 * 32 * 4  # the vector keeps float32 state
    assert cost.working_set == 2 * 4096 * 4 + 2 * 4096 * (1 + 4 / 256) + 4 * 32 * 4
    lion = roofline.step_cost("Lion8bit", opt.param_groups, {"streams": 5, "flops_per_param": 0},
                              quantized_state_bytes(case))
    assert lion.bytes == 3 * 4096 * 4 + 2 * 4096 * (1 + 4 / 256) + 5 * 32 * 4
    plain = SimpleNamespace(impl=SimpleNamespace(spec=None, is_candidate=False))
    assert quantized_state_bytes(plain) is None
    assert roofline.step_cost("AdamW", opt.param_groups).bytes == 7 * (4096 + 32) * 4


def test_roofline_adafactor_reads_the_gradient_twice_and_counts_its_factors():
    opt = stepped(torch.optim.Adafactor, [(64, 32)])
    assert roofline.step_cost("Adafactor", opt.param_groups).bytes == (4 * 64 * 32 + 2 * (64 + 32)) * 4
    assert roofline.step_cost("Adafactor", stepped(torch.optim.Adafactor, [(50,)]).param_groups).bytes == 5 * 50 * 4
    assert roofline.step_cost("LBFGS", opt.param_groups) is None


def test_roofline_muon_counts_newton_schulz_flops():
    opt = stepped(torch.optim.Muon, [(16, 64)])
    assert roofline.step_cost("Muon", opt.param_groups).flops == 5 * (4 * 16 * 16 * 64 + 2 * 16 ** 3)


def test_bandwidth_probe_is_an_in_place_stream_and_cached():
    bw = ceilings.bandwidth(CPU, 4 << 20, min_run_time=0.01)
    assert bw.kernel in ceilings.STREAM_BYTES and bw.gb_per_s == max(v for _, v in bw.by_kernel) > 0
    assert ceilings.bandwidth(CPU, 4 << 20, min_run_time=0.01) is bw  # one probe per size and thread count


def test_timing_takes_at_least_min_rounds_and_reports_spread():
    timing = measure(lambda: time.sleep(0.002), CPU, min_run_time=0.001, min_rounds=8)
    assert len(timing.rounds) >= 8 and 0.002 <= timing.median < 0.05
    rounds = np.array(timing.rounds)
    assert timing.iqr == pytest.approx(np.percentile(rounds, 75) - np.percentile(rounds, 25))
    assert timing.cv == pytest.approx(rounds.std(ddof=1) / rounds.mean()) and timing.cv > 0  # sleeps never tie exactly
    assert timing.threads == torch.get_num_threads()


def test_peak_transient_memory_shows_foreach_temporaries_and_a_wasteful_step():
    shapes = [(256, 256)] * 4
    peaks = {}
    for flags in ({"foreach": False}, {"foreach": True}, {"fused": True}):
        opt = stepped(torch.optim.Adam, shapes, **flags)
        peaks[next(iter(flags)) if flags != {"foreach": False} else "for-loop"] = peak_transient_bytes(opt.step, CPU)
    one = 256 * 256 * 4
    assert peaks["foreach"] >= 4 * one > peaks["for-loop"] >= one > 100 * peaks["fused"]
    params = [torch.randn(s) for s in shapes]
    assert peak_transient_bytes(lambda: [p.clone() for p in params], CPU) >= 4 * one  # a step that copies everything


def test_speed_workloads_are_model_shaped_seeded_and_edge_cases_apart():
    for n in (1e5, 1e6, 4e6, 1e7, 1e8):
        assert abs(speed.model(n).numel - n) / n < 0.15
        assert len({s.shape for s in speed.model(n).specs}) >= 4  # embedding, square, MLP, vectors
    a, b = (speed.model(2e4, seed=3).materialize(torch.float32, CPU) for _ in range(2))
    assert all(torch.equal(a[k], b[k]) and torch.equal(a[k].grad, b[k].grad) for k in a)
    assert all(p.is_contiguous() for p in a.values())
    nc = speed.model(2e4, edge="noncontiguous").materialize(torch.float32, CPU)
    assert all(not p.is_contiguous() and not p.grad.is_contiguous() for p in nc.values() if p.dim() == 2)
    assert 0 < sum(s.numel == 0 for s in speed.model(2e4, edge="zero_size").specs) <= 64
    none = speed.model(2e4, edge="none_grads").materialize(torch.float32, CPU)
    assert any(p.grad is None for p in none.values()) and any(p.grad is not None for p in none.values())
    assert (len(speed.tensors(1e5, 64).specs) == 64
            and speed.by_name("params-1e+05", 4e6).numel == speed.model(1e5).numel)


class SlowSGD(torch.optim.SGD):
    """A deliberately slow implementation: every step also sleeps 20 ms."""

    def step(self, closure=None):
        time.sleep(0.02)
        return super().step(closure)


def rows_of(out):
    return json.loads((out / "results.json").read_text())["rows"]


def value(rows, impl, metric_name, workload="model"):
    return next(r["value"] for r in rows
                if r["impl"] == impl and r["metric"] == metric_name and r["workload"] == workload and r["fqn"] == "")


def series(rows, impl, metric_name, workload="model"):
    """A per-round metric of one case, in round order."""
    found = sorted((r["step"], r["value"]) for r in rows
                   if r["impl"] == impl and r["metric"] == metric_name and r["workload"] == workload)
    return np.array([v for _, v in found])


def detail(rows, impl, metric_name, workload="model"):
    return next(r["detail"] for r in rows if r["impl"] == impl and r["metric"] == metric_name
                and r["workload"] == workload)


def test_speed_check_rows_roofline_and_overheads_and_a_slow_candidate_shows_it(tmp_path):
    out = tmp_path / "run"
    assert run_inline(["suite=sgd", "dtype=float32", "checks=[speed,memory]",
                       "candidate=tests.test_performance.SlowSGD", "impl=[for-loop,foreach,candidate]", *FAST,
                       f"out_dir={out}"]) == 0
    rows = rows_of(out)
    assert value(rows, "foreach", "roofline.bytes_per_param") == 12
    rounds = series(rows, "foreach", "time.round_ms")
    assert len(rounds) == value(rows, "foreach", "time.rounds") >= 3
    # the statistics are the rounds', and the derived rates follow from the step time, the bytes and the probe
    step_ms = value(rows, "foreach", "time.step_ms")
    assert step_ms == pytest.approx(np.median(rounds))
    assert value(rows, "foreach", "time.step_ms_cv") == pytest.approx(rounds.std(ddof=1) / rounds.mean())
    stepped = value(rows, "foreach", "speed.params_per_s") * step_ms / 1e3
    assert stepped == pytest.approx(speed.model(2e4).numel, rel=0.01)
    assert value(rows, "foreach", "speed.gb_per_s") == pytest.approx(12 * stepped / (step_ms / 1e3) / 1e9)
    # % of roofline: paired round by round with the bandwidth probe timed in the same rounds (interleaved)
    floors = series(rows, "foreach", "roofline.floor_round_ms")
    assert len(floors) == len(rounds)
    pct = value(rows, "foreach", "roofline.pct")
    assert pct == pytest.approx(np.median(100 * floors / rounds))
    assert value(rows, "foreach", "roofline.pct_ci_low") <= pct <= value(rows, "foreach", "roofline.pct_ci_high")
    # the ratio to the for-loop is paired too: the median of per-round ratios, with its interval
    loop = series(rows, "for-loop", "time.round_ms")
    ratio = value(rows, "foreach", "speed.ratio")
    assert ratio == pytest.approx(np.median(rounds / loop))
    assert value(rows, "foreach", "speed.ratio_ci_low") <= ratio <= value(rows, "foreach", "speed.ratio_ci_high")
    assert "vs for-loop: paired over" in detail(rows, "foreach", "speed.ratio")
    tiny = series(rows, "for-loop", "time.round_ms", "tiny_tensors")
    tiny_stepped = value(rows, "for-loop", "speed.params_per_s", "tiny_tensors") * np.median(tiny) / 1e3
    assert value(rows, "for-loop", "speed.overhead", "tiny_tensors") == pytest.approx(
        np.median(tiny / loop * stepped / tiny_stepped), rel=1e-3)
    assert value(rows, "foreach", "speed.threads") == torch.get_num_threads()
    # plain SGD keeps no state and its for-loop allocates nothing (the memory check's temporaries: elsewhere)
    assert value(rows, "foreach", "mem.state_bytes") == value(rows, "for-loop", "mem.state_bytes") == 0
    assert value(rows, "for-loop", "mem.peak_transient_bytes") == 0
    assert {r["workload"] for r in rows if r["metric"] == "speed.overhead"} == set(speed.EDGE_CASES)
    # 1024 extra 32-element tensors on a 2e4-parameter model: the for-loop's per-tensor cost dominates
    assert value(rows, "for-loop", "speed.overhead", "tiny_tensors") > 2
    slow = "candidate:tests.test_performance.SlowSGD"
    assert value(rows, slow, "time.step_ms") >= 20
    assert value(rows, slow, "roofline.pct") < value(rows, "for-loop", "roofline.pct") / 2
    report = (out / "report.md").read_text()
    assert "% of roofline" in report and "Edge-case overheads" in report and "peak transient" in report


@pytest.mark.slow  # (slow tier; CI keeps the speed check's rows and roofline)
def test_scaling_check_sweeps_sizes_and_counts_and_skips_what_does_not_fit(tmp_path):
    out = tmp_path / "scale"
    assert run_inline(["suite=adam", "dtype=float32", "impl=[for-loop,fused]", "checks=[scaling]", *FAST,
                       "scaling.params=[1e3,1e4]", "scaling.tensor_counts=[2,32]", "scaling.tensors_params=4096",
                       "report.plots=true", f"out_dir={out}"]) == 0
    rows = rows_of(out)
    timed = {(r["impl"], r["workload"]) for r in rows if r["check"] == "scaling" and r["metric"] == "roofline.pct"}
    assert timed == {(i, w) for i in ("for-loop", "fused")
                     for w in ("params-1e+03", "params-1e+04", "tensors-2", "tensors-32")}
    assert value(rows, "fused", "scaling.tensors", "tensors-32") == 32
    assert value(rows, "fused", "scaling.params", "tensors-32") == 4096  # scaling.tensors_params, split 32 ways
    assert (out / "scaling.png").is_file()
    out = tmp_path / "too-big"
    assert run_inline(["suite=adam", "dtype=float32", "impl=[fused]", "checks=[scaling]", *FAST,
                       "scaling.params=[1e12]", "scaling.tensor_counts=[]", f"out_dir={out}"]) == 3  # nothing measured
    skip = [r for r in rows_of(out) if r["status"] == "skip"]
    assert skip and "more than" in skip[0]["detail"]


def test_an_edge_case_a_declared_deviation_says_raises_is_xfail(tmp_path):
    """Adafactor divides by a zero-size parameter's numel (F04): its zero_size timing is that finding, not an error."""
    assert run_inline(["suite=adafactor", "dtype=float32", "impl=[for-loop]", "checks=[speed]", *FAST,
                       "speed.edge_cases=[zero_size,noncontiguous]", f"out_dir={tmp_path}"]) == 0
    raised = [r for r in rows_of(tmp_path) if r["metric"] == "speed.raises"]
    assert [(r["workload"], r["status"], r["detail"][:4]) for r in raised] == [("zero_size", "xfail", "F04:")]
    assert value(rows_of(tmp_path), "for-loop", "speed.overhead", "noncontiguous") > 0
