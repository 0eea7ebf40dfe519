"""Complex parameters for any reference here, by torch's documented rule.

torch documents (docs/source/complex_numbers.md, "Optimizers") that stepping an optimizer with complex
parameters means stepping the same optimizer on their ``torch.view_as_real`` equivalent: each element's
real and imaginary parts are two independent real parameters, the view having a trailing axis of 2. So
Adam's second moment of a complex gradient ``g`` is ``(Re g)**2 + 1j (Im g)**2``, not ``g * g`` and not
``|g|**2``; Rprop's first step size and Adagrad's initial accumulator are ``lr + 1j lr`` and ``v + 1j v``.

``as_complex(reference)`` keeps the reference contract (``optbench.reference``) with complex128 arrays:
the parameter, the gradient (dense, or a sparse ``(indices, values)`` pair) and the state arrive complex,
are viewed as float64 pairs ``(..., 2)``, the real reference steps, and every state array shaped like the
pairs goes back to complex (scalars such as ``step`` stay real). Real arrays pass through unchanged.

A closure-driven reference (LBFGS) works on the flat real vector of those pairs, in torch's order
(``view_as_real(p).view(-1)`` per parameter, concatenated), so its inner products are the real-pair dot
``Re(conj(a) . b)``; its state stays real, as torch's ``d`` and ``prev_flat_grad`` are.

A reference whose algorithm depends on the parameter's shape (Adafactor's factored moments over the last
two dimensions, Muon's orthogonalized matrices) has no complex form under this rule, and torch rejects
complex parameters for both: such a reference (``NO_COMPLEX_FORM``, or a module setting
``COMPLEX = False``) raises instead of computing on a meaningless (..., 2) shape.
"""

from __future__ import annotations

import numpy as np

from .contract import eager_state, kind_of

NO_COMPLEX_FORM = {"adafactor": "its second moment is factored over the last two dimensions",
                   "muon": "it orthogonalizes 2-D matrices"}


def pairs(x):
    """A complex array as float64 pairs ``(..., 2)`` (a new array); anything else as it is."""
    if isinstance(x, (np.ndarray, np.generic, complex)) and np.iscomplexobj(x):
        x = np.asarray(x)
        return np.stack([x.real, x.imag], axis=-1).astype(np.float64)
    return x


def joined(x: np.ndarray) -> np.ndarray:
    """Float64 pairs ``(..., 2)`` as a complex128 array ``(...)`` (0-dim included)."""
    out = np.empty(np.shape(x)[:-1], dtype=np.complex128)
    out.real, out.imag = x[..., 0], x[..., 1]
    return out


def _grad(grad):
    if isinstance(grad, tuple):  # sparse: the indices address the leading dimensions, unchanged
        indices, values = grad
        return indices, pairs(values)
    return pairs(grad)


class ComplexReference:
    """``reference`` stepping complex parameters as independent real and imaginary parts."""

    def __init__(self, reference):
        name = getattr(reference, "__name__", str(reference)).rpartition(".")[2]
        why = NO_COMPLEX_FORM.get(name) or ("it says COMPLEX = False" if getattr(reference, "COMPLEX", True) is False
                                            else "")
        if why:
            raise ValueError(f"reference {name!r} has no complex form: {why}")
        self.reference = reference
        self.KIND = kind_of(reference)
        self.EAGER_STATE = eager_state(reference)

    @staticmethod
    def _back(state: dict, shape: tuple) -> dict:
        """State arrays shaped like the pairs ``shape`` back to complex; everything else as it is."""
        return {k: joined(v) if isinstance(v, np.ndarray) and v.shape == shape else v for k, v in state.items()}

    def init(self, param: np.ndarray, hp: dict) -> dict:
        if not np.iscomplexobj(param):
            return self.reference.init(param, hp)
        real = pairs(param)
        if self.KIND == "closure":
            return self.reference.init(real.reshape(-1), hp)
        return self._back(self.reference.init(real, hp), real.shape)

    def update(self, param: np.ndarray, grad, state: dict, hp: dict) -> tuple[np.ndarray, dict]:
        if not np.iscomplexobj(param):
            return self.reference.update(param, grad, state, hp)
        real = pairs(param)
        new_param, new_state = self.reference.update(real, _grad(grad), {k: pairs(v) for k, v in state.items()}, hp)
        return joined(np.asarray(new_param)), self._back(new_state, real.shape)

    def step(self, x: np.ndarray, objective, state: dict, hp: dict):
        """One closure-driven step on the complex flat vector ``x``; ``objective`` takes and returns complex."""
        if not np.iscomplexobj(x):
            return self.reference.step(x, objective, state, hp)

        def real_objective(flat: np.ndarray):
            loss, grad = objective(joined(flat.reshape(-1, 2)))
            return loss, pairs(np.asarray(grad, dtype=np.complex128)).reshape(-1)

        flat, state, loss = self.reference.step(pairs(x).reshape(-1), real_objective, state, hp)
        return joined(flat.reshape(-1, 2)), state, loss


def as_complex(reference) -> ComplexReference:
    """``reference`` (a module keeping ``optbench.reference``'s contract) for complex parameters."""
    return reference if isinstance(reference, ComplexReference) else ComplexReference(reference)
