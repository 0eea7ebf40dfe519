"""Sparse COO gradients as the references take them: ``(indices, values)``.

``indices`` is an int array [sparse_dim, nnz] of coordinates into the leading ``sparse_dim``
dimensions; ``values`` is [nnz, *dense_dims]. A gradient may be uncoalesced: the same coordinate
may appear several times (its values sum, as torch's ``coalesce`` defines), and stored values may be
explicit zeros (a stored zero is still an entry an optimizer touches). ``nnz`` may be 0.
"""

import numpy as np


def coalesce(indices: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique coordinates in lexicographic order, with the values of duplicates summed."""
    indices = np.asarray(indices, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if indices.shape[1] == 0:
        return indices.reshape(indices.shape[0], 0), values.reshape((0,) + values.shape[1:])
    unique, inverse = np.unique(indices.T, axis=0, return_inverse=True)
    summed = np.zeros((unique.shape[0],) + values.shape[1:], dtype=np.float64)
    np.add.at(summed, inverse.reshape(-1), values)
    return unique.T, summed


def to_dense(indices: np.ndarray, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The dense array the COO gradient stands for (duplicates summed, everything else zero)."""
    indices, values = coalesce(indices, values)
    dense = np.zeros(shape, dtype=np.float64)
    if values.shape[0]:
        dense[tuple(indices)] = values
    return dense
