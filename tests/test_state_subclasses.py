"""State kept in a tensor subclass that wraps plain tensors (torchao's low-bit optimizers' ``OptimState8bit``, 4-bit
and FP8 alike) is read as its inner tensors: compared, recorded and its dtypes named through them, never through
operations the library may not implement. The subclass here implements no operation at all, as the strictest
library would."""

import pytest
import torch

from optbench.numerics.precision import kept_in
from optbench.numerics.recording import as_array, kinds, snapshot
from optbench.perf.case_timing import state_bytes
from optbench.state.copies import fresh_copy
from optbench.state.formats import same_value
from optbench.state.subclasses import inner_tensors, plain_state


class Codes(torch.Tensor):
    """A float32-looking tensor holding uint8 ``codes`` and a float32 ``scale`` per block; ``signed`` besides."""

    @staticmethod
    def __new__(cls, codes, scale, signed):
        return torch.Tensor._make_wrapper_subclass(cls, codes.shape, dtype=torch.float32, device=codes.device)

    def __init__(self, codes, scale, signed):
        self.codes, self.scale, self.signed = codes, scale, signed

    def __tensor_flatten__(self):
        return ["codes", "scale"], [self.signed]

    @classmethod
    def __tensor_unflatten__(cls, inner, ctx, outer_size=None, outer_stride=None):
        return cls(inner["codes"], inner["scale"], *ctx)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise NotImplementedError(f"Codes does not implement {func}")


class Nested(Codes):
    """A subclass whose ``codes`` are themselves a wrapping subclass."""

    def __tensor_flatten__(self):
        return ["codes"], [self.signed]


def codes(values=(1, 2, 3, 4), scale=(0.5,), signed=True) -> Codes:
    return Codes(torch.tensor(values, dtype=torch.uint8), torch.tensor(scale), signed)


def test_a_wrapping_subclass_compares_by_its_inner_tensors_and_what_it_holds_besides():
    a = codes()
    assert same_value(a, codes()) and same_value({"m": [a]}, {"m": [codes()]})
    assert not same_value(a, codes(values=(1, 2, 3, 5)))  # one code
    assert not same_value(a, codes(scale=(0.25,)))  # the scale
    assert not same_value(a, codes(signed=False))  # what it holds besides its tensors
    assert not same_value(a, torch.zeros(4)) and not same_value(torch.zeros(4), a)  # a plain tensor is not it
    assert not same_value(a, Codes(torch.tensor([1, 2, 3, 4], dtype=torch.int16), torch.tensor([0.5]), True))
    with pytest.raises(NotImplementedError):
        torch.equal(a, codes())  # what a comparison of the subclass itself would have met


def test_inner_tensors_are_named_as_the_spec_names_them_nested_ones_flattened():
    assert set(inner_tensors(codes())) == {"codes", "scale"}
    assert inner_tensors(torch.zeros(2)) is None and inner_tensors(torch.nn.Parameter(torch.zeros(2))) is None
    nested = Nested(codes(), torch.tensor([1.0]), True)
    assert set(inner_tensors(nested)) == {"codes.codes", "codes.scale"}
    state = plain_state({"step": torch.tensor(3.0), "exp_avg": codes()})
    assert set(state) == {"step", "exp_avg.codes", "exp_avg.scale"} and state["exp_avg.codes"].dtype == torch.uint8


def test_a_recording_holds_the_codes_and_scales_and_their_dtypes():
    p = torch.nn.Parameter(torch.zeros(4))
    optimizer = torch.optim.SGD([p], lr=0.1)
    optimizer.state[p] = {"step": torch.tensor(1.0), "exp_avg": codes()}
    shot = snapshot(optimizer, {"w": p})
    assert set(shot) == {("w", "param"), ("w", "step"), ("w", "exp_avg.codes"), ("w", "exp_avg.scale")}
    assert shot[("w", "exp_avg.codes")].tolist() == [1, 2, 3, 4] and shot[("w", "exp_avg.scale")].tolist() == [0.5]
    assert kinds(optimizer, {"w": p})[("w", "exp_avg.codes")] == "uint8"
    assert kept_in(optimizer, {"w": p})[("w", "exp_avg.scale")] == "float32"
    assert as_array(codes()) is None  # never its shown float32 through an operation it may not implement
    assert state_bytes(optimizer, {"w": p}) == {"w": 4 + 4 * 1 + 1 * 4}  # step, codes, scale: not 4 shown float32s
    again = fresh_copy(optimizer.state[p])  # rebuilt by the protocol (deepcopy would need the clone it lacks)
    assert type(again["exp_avg"]) is Codes and same_value(again["exp_avg"], optimizer.state[p]["exp_avg"])
    assert again["exp_avg"].codes.data_ptr() != optimizer.state[p]["exp_avg"].codes.data_ptr()
