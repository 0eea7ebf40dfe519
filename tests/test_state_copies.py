"""optbench.state.copies.fresh_copy: what copy.deepcopy gives a state_dict read back by torch.load, faster."""

import copy
import io

import pytest
import torch

from optbench.state.copies import fresh_copy


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor) and a.is_sparse:
        return type(a) is type(b) and b.is_sparse and torch.equal(a.to_dense(), b.to_dense())
    if isinstance(a, torch.Tensor):
        return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
                and a.storage_offset() == b.storage_offset() and torch.equal(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def read_back(state_dict: dict) -> dict:
    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    return torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)


def test_a_fresh_copy_is_a_deep_copy_that_keeps_which_tensors_share_storage():
    flat = torch.arange(12.0)
    loaded = read_back({
        "state": {0: {"step": torch.tensor(3.0), "exp_avg": flat[:6].view(2, 3), "exp_avg_sq": flat[6:],
                      "empty": torch.empty(0), "other": torch.zeros(3, 2, dtype=torch.bfloat16).t()},
                  1: {"matrix": flat.view(3, 4).t(), "count": 7, "sparse": torch.eye(2).to_sparse()}},
        "param_groups": [{"lr": 0.1, "betas": (0.9, 0.99), "params": [0, 1], "param_names": ["a", "b"],
                          "kept": [1, {"z": None}]}]})
    copied = fresh_copy(loaded)
    assert same(copied, copy.deepcopy(loaded)) and same(copied, loaded)
    copied["state"][0]["exp_avg"].add_(100.0)
    assert copied["state"][1]["matrix"][0].tolist() == [100.0, 104.0, 8.0]  # one storage, as read back
    assert loaded["state"][1]["matrix"][0].tolist() == [0.0, 4.0, 8.0]  # the original untouched
    copied["param_groups"][0]["kept"][1]["z"] = 1
    copied["state"][1]["sparse"].values().add_(1.0)
    assert loaded["param_groups"][0]["kept"][1]["z"] is None and loaded["state"][1]["sparse"].values().sum() == 2


def test_a_tensor_subclass_or_a_tensor_needing_grad_is_deep_copied():
    parameter, leaf = torch.nn.Parameter(torch.ones(2)), torch.ones(2, requires_grad=True)
    copied = fresh_copy({"p": parameter, "g": leaf})
    assert type(copied["p"]) is torch.nn.Parameter and copied["g"].requires_grad
    assert copied["p"].data_ptr() != parameter.data_ptr() and copied["g"].data_ptr() != leaf.data_ptr()


class _Wrapped(torch.Tensor):
    """A tensor subclass that implements no clone (as torchao's quantized state): deepcopy cannot copy it."""

    def clone(self, *args, **kwargs):
        raise NotImplementedError("clone")


torch.serialization.add_safe_globals([_Wrapped])


def test_a_tensor_subclass_is_copied_as_a_checkpoint_carries_it():
    value = torch.arange(4.0).as_subclass(_Wrapped)
    with pytest.raises((NotImplementedError, RuntimeError)):
        copy.deepcopy(value)
    copied = fresh_copy({"state": {0: {"exp_avg": value}}})["state"][0]["exp_avg"]
    assert type(copied) is _Wrapped and torch.equal(copied.as_subclass(torch.Tensor), torch.arange(4.0))
    assert copied.data_ptr() != value.data_ptr()
