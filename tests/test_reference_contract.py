"""The reference contract (optbench.reference.contract): every built-in keeps it, and a module that does not is
refused when loaded, in one line naming the module and the broken piece."""

import sys
from types import ModuleType

import pytest

from optbench.reference import ContractError, NotAReference, builtin_names, load_reference
from optbench.reference.contract import PROTOCOLS, decisions_of, eager_state, kind_of, required

REQUIRED = {"gradient": ("init", "update"), "closure": ("init", "step"), "group": ("init", "update_group")}


def toy(kind: str, name: str = "toy_reference", **extra) -> ModuleType:
    module = ModuleType(name)
    if kind != "gradient":
        module.KIND = kind
    for f in REQUIRED[kind]:
        setattr(module, f, lambda *args: None)
    for key, value in extra.items():
        if value is ...:
            delattr(module, key)
        else:
            setattr(module, key, value)
    return module


def load(module: ModuleType, monkeypatch) -> ModuleType:
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return load_reference(module.__name__)


def refused(module: ModuleType, monkeypatch) -> str:
    with pytest.raises(NotAReference) as info:
        load(module, monkeypatch)
    message = str(info.value)
    assert "\n" not in message and "'toy_reference'" in message, message
    return message


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_reference_keeps_its_kinds_contract(name):
    module = load_reference(name)
    assert kind_of(module) in PROTOCOLS and isinstance(eager_state(module), bool)


def test_required_members_are_read_from_the_protocols():
    assert {kind: required(protocol) for kind, protocol in PROTOCOLS.items()} == REQUIRED


@pytest.mark.parametrize("kind", REQUIRED)
def test_a_complete_module_of_each_kind_loads(kind, monkeypatch):
    module = toy(kind, EAGER_STATE=True, **({"decisions": lambda *a: []} if kind == "gradient" else {}))
    assert load(module, monkeypatch) is module
    assert kind_of(module) == kind and eager_state(module) is True


@pytest.mark.parametrize(("kind", "piece"), [(k, f) for k, fs in REQUIRED.items() for f in fs])
def test_a_missing_required_function_is_named(kind, piece, monkeypatch):
    message = refused(toy(kind, **{piece: ...}), monkeypatch)
    assert f"has no {piece}()" in message and PROTOCOLS[kind].__name__ in message, message


@pytest.mark.parametrize(("kind", "piece"), [(k, f) for k, fs in REQUIRED.items() for f in fs])
def test_a_required_member_that_is_not_a_function_is_named(kind, piece, monkeypatch):
    assert f": {piece} is a float, not a function" in refused(toy(kind, **{piece: 1.0}), monkeypatch)


def test_a_wrong_eager_state_type_fails(monkeypatch):
    message = refused(toy("gradient", EAGER_STATE="yes"), monkeypatch)
    assert "EAGER_STATE is 'yes', not True or False" in message, message


def test_an_unknown_kind_fails(monkeypatch):
    module = toy("gradient", KIND="batched")
    assert "KIND 'batched' is none of 'gradient', 'closure', 'group'" in refused(module, monkeypatch)


def test_decisions_that_are_not_a_function_fail(monkeypatch):
    assert ": decisions is a list, not a function" in refused(toy("gradient", decisions=[]), monkeypatch)


def test_a_refusal_is_a_contract_error_and_an_attribute_error(monkeypatch):
    """Callers that turn a reference that cannot be loaded into a usage error catch AttributeError."""
    with pytest.raises(AttributeError) as info:
        load(toy("gradient", update=...), monkeypatch)
    assert isinstance(info.value, ContractError)


def test_the_optional_members_read_with_their_defaults():
    bare = toy("gradient")
    assert (kind_of(bare), eager_state(bare), decisions_of(bare)) == ("gradient", False, None)


def test_group_step_gives_any_reference_the_groups_count():
    """A library's per-group step counter (every step() call) for a reference that counts per tensor (RAdam's, which
    reads no group_step itself): a tensor whose first gradient comes at the third step() call is bias-corrected
    with t = 3, as torch's own count would give after three updates; without the option, with t = 1."""
    import numpy as np

    from optbench.reference import load_reference
    from optbench.reference.group_step import with_group_step

    radam = load_reference("radam")
    hp = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0, "decoupled_weight_decay": False,
          "maximize": False, "foreach": None, "capturable": False, "differentiable": False, "dtype_eps": 2.0**-52}
    p, g = np.array([1.0, -2.0]), np.array([0.5, 0.25])
    wrapped = with_group_step(radam, [{**hp, "group_step": True}])
    assert with_group_step(radam, [hp]) is radam
    late, late_state = wrapped.update(p, g, radam.init(p, hp), {**hp, "group_step": True, "iteration": 3.0})
    assert float(late_state["step"]) == 3.0
    first, _ = radam.update(p, g, radam.init(p, hp), hp)
    assert not np.array_equal(late, first)  # t = 3, not 1: another bias correction
    state3 = {**radam.init(p, hp), "step": np.float64(2.0)}
    np.testing.assert_array_equal(late, radam.update(p, g, state3, hp)[0])
