"""Interleaved rounds (optbench.perf.interleave): the order, the pairing and what a failing contender does. No
timing figure is asserted here (speed targets live in tests/benchmarks)."""

import numpy as np
import pytest

from optbench.perf.interleave import Contender, interleaved, paired_ratio


def test_a_paired_ratio_cancels_drift_that_unpaired_medians_report_as_a_difference():
    drift = np.linspace(1.0, 3.0, 20)  # the machine slows threefold over the run
    a, b = 1e-3 * drift, 2e-3 * drift  # b does twice a's work, in every round
    paired = paired_ratio(b, a)
    assert (paired.median, paired.low, paired.high, paired.rounds) == (2.0, 2.0, 2.0, 20)
    # timed one after the other (a in the quiet first half, b in the busy second), the medians' ratio is off
    sequential = np.median(2e-3 * drift[10:]) / np.median(1e-3 * drift[:10])
    assert sequential > 3


def test_the_interval_covers_the_median_and_widens_with_noise():
    rng = np.random.default_rng(1)
    a = np.full(30, 1e-3)
    quiet, noisy = paired_ratio(a * 1.5 * rng.normal(1, 0.01, 30), a), paired_ratio(a * 1.5 * rng.normal(1, 0.2, 30), a)
    for r in (quiet, noisy):
        assert r.low <= r.median <= r.high
    assert noisy.high - noisy.low > 5 * (quiet.high - quiet.low)
    assert paired_ratio(a[:2], a[:2]) is None  # too few rounds for an interval


def logged(calls: list, name: str, fail_after: int | None = None):
    count = [0]

    def step():
        calls.append(name)
        count[0] += 1
        if fail_after is not None and count[0] > fail_after:
            raise RuntimeError(f"{name} broke")
    return step


def rounds_order(calls: list, result, names: list) -> list[tuple]:
    """The order the contenders ran in each timed round: the calls after the warm-up, cut into blocks."""
    sizes = {n: result.timings[n].steps_per_round for n in names}
    rounds = len(result.timings[names[0]].rounds)
    timed = calls[len(calls) - rounds * sum(sizes.values()):]
    order, i = [], 0
    while i < len(timed):
        block = timed[i:i + sizes[timed[i]]]
        assert set(block) == {timed[i]}  # a block is one contender's calls
        order.append(timed[i])
        i += len(block)
    return [tuple(order[r:r + len(names)]) for r in range(0, len(order), len(names))]


def test_every_round_times_each_contender_once_in_a_seeded_random_order():
    orders = []
    for _ in range(2):
        calls: list = []
        names = ["a", "b", "c"]
        result = interleaved([Contender(n, logged(calls, n)) for n in names], min_run_time=1e-6, min_rounds=12,
                             seed=7)
        assert all(len(t.rounds) == 12 for t in result.timings.values()) and not result.failed
        order = rounds_order(calls, result, names)
        assert len(order) == 12 and all(sorted(o) == names for o in order)
        assert len(set(order)) > 1  # not one fixed order: drift does not always land on the same side
        orders.append(order)
    assert orders[0] == orders[1]  # the same seed, the same order


def test_a_contender_that_raises_is_dropped_and_the_others_are_still_timed():
    calls: list = []

    def breaks_once_rounds_start():  # warm-ups run one contender after another; rounds mix them
        if "bad" in calls and calls[-1] == "ok":
            raise RuntimeError("bad broke")
        calls.append("bad")
    result = interleaved([Contender("ok", logged(calls, "ok")), Contender("bad", breaks_once_rounds_start)],
                         min_run_time=1e-6, min_rounds=10, seed=0)
    assert set(result.timings) == {"ok"} and len(result.timings["ok"].rounds) >= 10
    assert str(result.failed["bad"]) == "bad broke" and calls.count("bad") > 0  # it had warmed up
    assert result.paired("ok", "bad") is None


@pytest.mark.parametrize("scale", [1.0, 3.0])
def test_paired_scales_the_first_side(scale):
    calls: list = []
    result = interleaved([Contender("x", logged(calls, "x")), Contender("y", logged(calls, "y"))],
                         min_run_time=1e-6, min_rounds=5, seed=0)
    x, y = (np.asarray(result.timings[k].rounds) for k in "xy")
    assert result.paired("x", "y", scale=scale).median == pytest.approx(np.median(scale * x / y))
