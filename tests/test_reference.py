"""The float64 references: torch-free, pure, and equal to hand-computed steps."""

import ast
from pathlib import Path

import numpy as np
import pytest

from optbench.reference import REFERENCES, adafactor, adam, sgd, sparse_adam

REFERENCE_DIR = Path(__file__).parents[1] / "reference"


def test_reference_never_imports_torch():
    for path in REFERENCE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "torch" or n.startswith("torch.") for n in names), f"{path.name} imports torch"


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_update_does_not_mutate_inputs(name):
    ref = REFERENCES[name]
    rng = np.random.default_rng(0)
    param = rng.standard_normal((3, 4))
    hp = {"lr": 0.1, "betas": (0.9, 0.99), "eps": (None, 1e-3) if name == "adafactor" else 1e-8,
          "beta2_decay": -0.8, "d": 1.0, "weight_decay": 0.1, "momentum": 0.9, "dtype_eps": 2.0**-52}
    grad = (np.array([[0, 2]]), rng.standard_normal((2, 4))) if name == "sparse_adam" else rng.standard_normal((3, 4))
    state = ref.init(param, hp)
    before = (param.copy(), {k: np.copy(v) for k, v in state.items()})
    ref.update(param, grad, state, hp)
    assert np.array_equal(param, before[0])
    assert all(np.array_equal(state[k], before[1][k]) for k in state)


def test_adam_first_step_is_lr_times_sign():
    p, g = np.array([1.0, -2.0]), np.array([0.5, -3.0])
    hp = {"lr": 0.01, "betas": (0.9, 0.999), "eps": 0.0}
    new, state = adam.update(p, g, adam.init(p, hp), hp)
    np.testing.assert_allclose(new, p - 0.01 * np.sign(g), rtol=1e-14)
    assert state["step"] == 1.0


def test_sgd_nesterov_by_hand():
    p, g = np.array([1.0]), np.array([2.0])
    hp = {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.5}
    new, state = sgd.update(p, g, {}, hp)
    d = 2.0 + 0.5 * 1.0  # decayed gradient = first momentum buffer
    np.testing.assert_allclose(state["momentum_buffer"], [d])
    np.testing.assert_allclose(new, p - 0.1 * (d + 0.9 * d))


def test_adafactor_factors_last_two_dims():
    p = np.ones((2, 3, 4))
    state = adafactor.init(p, {})
    assert state["row_var"].shape == (2, 3, 1) and state["col_var"].shape == (2, 1, 4)
    assert "variance" in adafactor.init(np.ones(5), {})


def test_sparse_adam_touches_only_given_rows():
    p = np.ones((4, 2))
    hp = {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8}
    new, state = sparse_adam.update(p, (np.array([[1, 3]]), np.full((2, 2), 0.5)), sparse_adam.init(p, hp), hp)
    assert np.array_equal(new[[0, 2]], p[[0, 2]]) and np.all(new[[1, 3]] < 1.0)
    assert state["step"] == 1.0
