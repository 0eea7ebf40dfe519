"""Hand-computed checks of the Adagrad reference (pure NumPy)."""

import numpy as np
import pytest

from optbench.reference import adagrad

HP = {"lr": 0.1, "lr_decay": 0.0, "weight_decay": 0.0, "initial_accumulator_value": 0.0, "eps": 0.0,
      "maximize": False, "dtype_eps": 2.0**-52}


def test_two_steps_by_hand_with_decay_and_initial_accumulator():
    hp = {**HP, "lr_decay": 0.5, "weight_decay": 0.5, "initial_accumulator_value": 1.0}
    p = np.array([1.0])
    state = adagrad.init(p, hp)
    np.testing.assert_array_equal(state["sum"], [1.0])
    p1, state = adagrad.update(p, np.array([2.0]), state, hp)
    # step 1: g = 2 + 0.5 * 1 = 2.5, sum = 1 + 6.25, clr = 0.1 / (1 + 0 * 0.5)
    np.testing.assert_allclose(state["sum"], [7.25], rtol=1e-15)
    np.testing.assert_allclose(p1, [1.0 - 0.1 * 2.5 / np.sqrt(7.25)], rtol=1e-15)
    p2, state = adagrad.update(p1, np.array([-1.0]), state, hp)
    # step 2: g = -1 + 0.5 * p1, clr = 0.1 / (1 + 1 * 0.5)
    g = -1.0 + 0.5 * p1[0]
    np.testing.assert_allclose(state["sum"], [7.25 + g * g], rtol=1e-15)
    np.testing.assert_allclose(p2, [p1[0] - (0.1 / 1.5) * g / np.sqrt(7.25 + g * g)], rtol=1e-15)
    assert state["step"] == 2.0


def test_sparse_uncoalesced_duplicates_zeros_and_empty():
    hp = {**HP, "eps": 1e-10}  # eps keeps the explicit zero at a zero accumulator finite (0 / eps)
    p = np.arange(8.0).reshape(4, 2)
    state = adagrad.init(p, hp)
    # row 0 twice (1 + 0.5 = 1.5), row 2 once, row 3 an explicit zero; row 1 untouched
    indices = np.array([[0, 2, 0, 3]])
    values = np.array([[1.0, -1.0], [2.0, 2.0], [0.5, -0.5], [0.0, 0.0]])
    new, state = adagrad.update(p, (indices, values), state, hp)
    np.testing.assert_allclose(state["sum"], [[2.25, 2.25], [0, 0], [4, 4], [0, 0]], rtol=1e-15)
    # first step from a zero accumulator: each touched nonzero entry moves by lr * g / (|g| + eps)
    np.testing.assert_allclose(new, p - 0.1 * np.array([[1, -1], [0, 0], [1, 1], [0, 0]]), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(new[[1, 3]], p[[1, 3]])
    # an empty gradient (nnz 0) only counts the step
    newer, state2 = adagrad.update(new, (np.zeros((1, 0), dtype=np.int64), np.zeros((0, 2))), state, hp)
    np.testing.assert_array_equal(newer, new)
    np.testing.assert_array_equal(state2["sum"], state["sum"])
    assert state2["step"] == 2.0
    # maximize flips the sparse values too
    up, _ = adagrad.update(p, (indices, values), adagrad.init(p, hp), {**hp, "maximize": True})
    np.testing.assert_allclose(up - p, p - new, rtol=1e-12)
    with pytest.raises(ValueError, match="weight_decay"):
        adagrad.update(p, (indices, values), adagrad.init(p, HP), {**HP, "weight_decay": 0.1})


def test_sparse_matches_dense_and_odd_shapes():
    hp = {**HP, "lr_decay": 0.1, "initial_accumulator_value": 0.3, "eps": 1e-10}
    p, g = np.array([[1.0, 2.0, 3.0]]), np.array([[0.5, -0.25, 4.0]])
    dense, _ = adagrad.update(p, g, adagrad.init(p, hp), hp)
    coo, _ = adagrad.update(p, (np.array([[0, 0, 0], [2, 0, 1]]), np.array([4.0, 0.5, -0.25])), adagrad.init(p, hp), hp)
    np.testing.assert_allclose(coo, dense, rtol=1e-15)
    for shape in [(), (0,), (0, 4)]:
        q = np.ones(shape)
        new, state = adagrad.update(q, np.full(shape, 2.0), adagrad.init(q, hp), hp)
        assert new.shape == shape and state["sum"].shape == shape
        np.testing.assert_allclose(state["sum"], np.full(shape, 4.3))
    # a 0-dim parameter with a sparse gradient (sparse_dim 0): its entries sum
    q = np.array(1.0)
    new, _ = adagrad.update(q, (np.zeros((0, 2), dtype=np.int64), np.array([1.5, 0.5])), adagrad.init(q, hp), hp)
    ref, _ = adagrad.update(q, np.array(2.0), adagrad.init(q, hp), hp)
    np.testing.assert_allclose(new, ref, rtol=1e-15)
