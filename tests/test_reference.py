"""The float64 references: torch-free, pure, and equal to hand-computed steps."""

import ast
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_module

import optbench.checks  # noqa: F401  (the checks' config blocks)
from optbench.reference import adafactor, adam, builtin_names, load_reference, sgd, sparse_adam
from optbench.reference.contract import kind_of
from optbench.reference.sparse import coalesce, to_dense
from optbench.suite.catalog import optimizer_suite_names, resolve

REFERENCE_DIR = Path(__file__).parents[1] / "reference"


def suite(name):
    with initialize_config_module(config_module="optbench.suites", version_base="1.3"):
        return resolve(compose(config_name="config", overrides=[f"suite={name}"]).suite)[0]


def test_reference_never_imports_torch():
    for path in REFERENCE_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "torch" or n.startswith("torch.") for n in names), f"{path.name} imports torch"


def test_every_optimizer_suite_has_a_builtin_reference():
    assert {suite(n).reference_name for n in optimizer_suite_names()} <= set(builtin_names())


@pytest.mark.parametrize("name", optimizer_suite_names())
def test_update_does_not_mutate_inputs(name):
    s = suite(name)
    ref = s.reference
    rng = np.random.default_rng(0)
    for hset in s.hparams:
        hp = hset.reference_hp(["p"], s.defaults(), {**s.reference_options, "dtype_eps": 2.0**-52})["p"]
        param = rng.standard_normal((3, 4))
        if s.closure_driven:
            flat = param.reshape(-1)
            state = ref.init(flat, hp)
            before = (flat.copy(), {k: np.copy(v) for k, v in state.items() if isinstance(v, np.ndarray)})
            ref.step(flat, lambda x: (float(0.5 * x @ x), x.copy()), state, hp)
            assert np.array_equal(flat, before[0])
            continue
        grad = (np.array([[0, 2, 0]]), rng.standard_normal((3, 4))) if (hset.workload or s.workload) in (
            "sparse_embedding", "zoo_sparse") else rng.standard_normal((3, 4))
        state = ref.init(param, hp)
        before = (param.copy(), {k: np.copy(v) for k, v in state.items()})
        if kind_of(ref) == "group":  # a group at once (ScaledAdam): here a group of one
            ref.update_group({"p": param}, {"p": grad}, {"p": state}, hp)
        else:
            ref.update(param, grad, state, hp)
        assert np.array_equal(param, before[0])
        assert all(np.array_equal(state[k], before[1][k]) for k in state), hset.name


def test_load_reference_by_dotted_path_and_contract():
    assert load_reference("optbench.reference.adam") is adam
    with pytest.raises(AttributeError, match="has no init, update"):
        load_reference("optbench.reference.sparse")


def test_coalesce_sums_duplicates_and_keeps_explicit_zeros():
    indices, values = coalesce(np.array([[3, 1, 3]]), np.array([[1.0], [0.0], [2.0]]))
    assert indices.tolist() == [[1, 3]] and values.tolist() == [[0.0], [3.0]]
    assert to_dense(np.array([[2, 2]]), np.array([1.0, 1.5]), (4,)).tolist() == [0.0, 0.0, 2.5, 0.0]


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


def test_sgd_sparse_gradient_is_its_dense_sum():
    p = np.zeros(3)
    new, _ = sgd.update(p, (np.array([[1, 1]]), np.array([1.0, 2.0])), {}, {"lr": 0.5})
    assert new.tolist() == [0.0, -1.5, 0.0]


def test_adafactor_factors_last_two_dims():
    p = np.ones((2, 3, 4))
    state = adafactor.init(p, {})
    assert state["row_var"].shape == (2, 3, 1) and state["col_var"].shape == (2, 1, 4)
    assert "variance" in adafactor.init(np.ones(5), {})


def test_sparse_adam_touches_only_given_rows_and_sums_duplicates():
    p = np.ones((4, 2))
    hp = {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8}
    new, state = sparse_adam.update(p, (np.array([[1, 3]]), np.full((2, 2), 0.5)), sparse_adam.init(p, hp), hp)
    assert np.array_equal(new[[0, 2]], p[[0, 2]]) and np.all(new[[1, 3]] < 1.0)
    assert state["step"] == 1.0
    dup, _ = sparse_adam.update(p, (np.array([[1, 1]]), np.full((2, 2), 0.25)), sparse_adam.init(p, hp), hp)
    once, _ = sparse_adam.update(p, (np.array([[1]]), np.full((1, 2), 0.5)), sparse_adam.init(p, hp), hp)
    np.testing.assert_array_equal(dup, once)
