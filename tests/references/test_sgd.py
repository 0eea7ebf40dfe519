"""Hand-computed checks of the SGD reference's decoupled weight decay (pure NumPy; torch's SGD is judged against the
rest of it in the sgd suite)."""

import numpy as np

from optbench.reference import sgd

HP = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.5, "nesterov": False, "maximize": False,
      "dtype_eps": 2.0**-52}


def test_decoupled_weight_decay_scales_the_parameter_and_leaves_the_momentum_undecayed():
    p, g = np.array([2.0, -4.0]), np.array([1.0, 1.0])
    hp = {**HP, "decoupled_weight_decay": True}
    new, state = sgd.update(p, g, sgd.init(p, hp), hp)
    np.testing.assert_array_equal(state["momentum_buffer"], g)  # the gradient alone
    np.testing.assert_allclose(new, p * (1 - 0.1 * 0.5) - 0.1 * g, rtol=1e-15)
    coupled, state = sgd.update(p, g, sgd.init(p, HP), HP)
    np.testing.assert_allclose(state["momentum_buffer"], g + 0.5 * p, rtol=1e-15)  # L2: the decay enters the buffer
    np.testing.assert_allclose(coupled, p - 0.1 * (g + 0.5 * p), rtol=1e-15)
