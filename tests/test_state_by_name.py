"""load_state_dict_by_name against torch's positional loader (PyTorch #1489)."""

import io

import pytest
import torch

from optbench import load_state_dict_by_name, name_aware, to_flat, to_name_keyed, with_param_names
from optbench.state.by_name import StateDictNameError


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))


def trained(m):
    opt = torch.optim.AdamW(m.named_parameters(), lr=0.1)
    for _ in range(3):
        m(torch.randn(5, 4)).sum().backward()
        opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_by_name_attaches_state_to_the_right_parameter_where_torch_does_not():
    m = model()
    sd = trained(m)
    reversed_named = list(reversed(list(m.named_parameters())))
    positional = torch.optim.AdamW(reversed_named, lr=0.1)
    positional.load_state_dict(sd)
    by_name = torch.optim.AdamW(reversed_named, lr=0.1)
    load_state_dict_by_name(by_name, sd)
    saved = {n: sd["state"][i] for n, i in zip(sd["param_groups"][0]["param_names"], sd["param_groups"][0]["params"])}
    for name, p in reversed_named:
        assert torch.equal(by_name.state[p]["exp_avg"], saved[name]["exp_avg"])
    wrong = [n for n, p in reversed_named if positional.state[p]["exp_avg"].shape != saved[n]["exp_avg"].shape
             or not torch.equal(positional.state[p]["exp_avg"], saved[n]["exp_avg"])]
    assert wrong  # torch's positional load misattributes (this is the bug optbench reports)


def test_missing_and_unexpected_names_are_named():
    m = model()
    sd = trained(m)
    named = list(m.named_parameters())
    fewer = torch.optim.AdamW(named[1:], lr=0.1)
    with pytest.raises(StateDictNameError, match="unexpected in the state_dict: 0.weight"):
        load_state_dict_by_name(fewer, sd)
    renamed = torch.optim.AdamW([("extra.weight", named[0][1])] + named[1:], lr=0.1)
    with pytest.raises(StateDictNameError, match="missing from the state_dict: extra.weight"):
        load_state_dict_by_name(renamed, sd)
    load_state_dict_by_name(renamed, sd, strict=False)  # non-strict: the unknown one starts fresh
    assert named[0][1] not in renamed.state and named[1][1] in renamed.state


def test_unnamed_optimizer_is_refused_with_a_hint():
    m = model()
    sd = trained(m)
    with pytest.raises(StateDictNameError, match="named_parameters"):
        load_state_dict_by_name(torch.optim.AdamW(m.parameters(), lr=0.1), sd)


def _saved_exp_avg(sd):
    group = sd["param_groups"][0]
    return {n: sd["state"][i]["exp_avg"] for n, i in zip(group["param_names"], group["params"])}


def test_rename_maps_a_wrapped_models_names_by_mapping_or_callable():
    m = model()
    sd = trained(m)
    saved = _saved_exp_avg(sd)
    wrapped = [(f"module.{n}", p) for n, p in reversed(list(m.named_parameters()))]  # as DDP names them
    opt = torch.optim.AdamW(wrapped, lr=0.1)
    with pytest.raises(StateDictNameError, match="missing from the state_dict: module."):
        load_state_dict_by_name(opt, sd)
    load_state_dict_by_name(opt, sd, rename=lambda n: f"module.{n}")
    assert all(torch.equal(opt.state[p]["exp_avg"], saved[n.removeprefix("module.")]) for n, p in wrapped)
    compiled = [(f"_orig_mod.{n}", p) for n, p in m.named_parameters()]  # as torch.compile names them
    opt = torch.optim.AdamW(compiled, lr=0.1)
    load_state_dict_by_name(opt, sd, rename={n: f"_orig_mod.{n}" for n in saved})
    assert all(torch.equal(opt.state[p]["exp_avg"], saved[n.removeprefix("_orig_mod.")]) for n, p in compiled)
    with pytest.raises(StateDictNameError, match="rename maps two saved parameters to one name: x"):
        load_state_dict_by_name(opt, sd, rename=lambda n: "x")
    with pytest.raises(TypeError, match="mapping or a callable"):
        load_state_dict_by_name(opt, sd, rename=3)


def test_name_aware_makes_torchs_own_load_state_dict_match_by_name_until_removed():
    m = model()
    sd = trained(m)
    saved = _saved_exp_avg(sd)
    reversed_named = list(reversed(list(m.named_parameters())))
    opt = torch.optim.AdamW(reversed_named, lr=0.1)
    handle = name_aware(opt)
    opt.load_state_dict(sd)
    assert all(torch.equal(opt.state[p]["exp_avg"], saved[n]) for n, p in reversed_named)
    handle.remove()  # torch's positional behaviour again: the wrong state (PyTorch #1489)
    opt.load_state_dict(sd)
    assert not all(opt.state[p]["exp_avg"].shape == saved[n].shape and torch.equal(opt.state[p]["exp_avg"], saved[n])
                   for n, p in reversed_named)
    strict = torch.optim.AdamW(reversed_named[1:], lr=0.1)
    name_aware(strict)
    with pytest.raises(StateDictNameError, match="unexpected in the state_dict"):
        strict.load_state_dict(sd)
    with pytest.raises(StateDictNameError, match="named_parameters"):
        name_aware(torch.optim.AdamW(m.parameters(), lr=0.1))


def test_regrouped_parameters_take_their_new_groups_hyperparameters_and_a_resumed_group_its_saved_ones():
    m = model()
    sd = trained(m)  # one group, lr 0.1
    named = list(m.named_parameters())
    same = torch.optim.AdamW(named, lr=0.5)
    load_state_dict_by_name(same, sd)
    assert same.param_groups[0]["lr"] == 0.1  # the same group again: resumes with the saved hyperparameters
    split = torch.optim.AdamW([{"params": named[:2], "lr": 0.01}, {"params": named[2:], "lr": 0.02}])
    load_state_dict_by_name(split, sd)
    assert [g["lr"] for g in split.param_groups] == [0.01, 0.02]  # regrouped: the new groups' own
    saved = _saved_exp_avg(sd)
    assert all(torch.equal(split.state[p]["exp_avg"], saved[n]) for n, p in named)


def test_keys_an_old_checkpoint_lacks_keep_the_current_groups_values():
    m = model()
    sd = trained(m)
    old = {"state": sd["state"], "param_groups": [{k: v for k, v in g.items() if k not in ("maximize", "foreach")}
                                                  for g in sd["param_groups"]]}
    opt = torch.optim.AdamW(m.named_parameters(), lr=0.1, maximize=True, foreach=False)
    load_state_dict_by_name(opt, old)
    assert opt.param_groups[0]["maximize"] is True and opt.param_groups[0]["foreach"] is False
    positional = torch.optim.AdamW(m.named_parameters(), lr=0.1, maximize=True, foreach=False)
    positional.load_state_dict(old)
    assert positional.param_groups[0]["maximize"] is False  # torch fills torch's defaults instead


def test_a_changed_shape_is_named_and_unnamed_state_dicts_get_names():
    m = model()
    sd = trained(m)
    grown = [(n, torch.nn.Parameter(torch.zeros(p.shape[0] + 1, *p.shape[1:]))) if n == "0.weight" else (n, p)
             for n, p in m.named_parameters()]
    with pytest.raises(StateDictNameError, match=r"0.weight changed shape: its saved state exp_avg has shape \(3, 4\)"):
        load_state_dict_by_name(torch.optim.AdamW(grown, lr=0.1), sd)
    unnamed = {"state": sd["state"], "param_groups": [{k: v for k, v in g.items() if k != "param_names"}
                                                      for g in sd["param_groups"]]}
    reversed_named = list(reversed(list(m.named_parameters())))
    opt = torch.optim.AdamW(reversed_named, lr=0.1)
    with pytest.raises(StateDictNameError, match="no 'param_names'"):
        load_state_dict_by_name(opt, unnamed)
    load_state_dict_by_name(opt, with_param_names(unnamed, [n for n, _ in m.named_parameters()]))
    saved = _saved_exp_avg(sd)
    assert all(torch.equal(opt.state[p]["exp_avg"], saved[n]) for n, p in reversed_named)
    with pytest.raises(StateDictNameError, match="3 names for a state_dict of 4 parameters"):
        with_param_names(unnamed, ["a", "b", "c"])


def test_a_new_parameter_keeps_the_state_its_optimizer_set_up_at_construction():
    m = model()
    named = list(m.named_parameters())
    opt = torch.optim.Adagrad(named[1:], lr=0.1, initial_accumulator_value=0.5)
    sd = opt.state_dict()
    bigger = torch.optim.Adagrad(named, lr=0.1, initial_accumulator_value=0.5)
    load_state_dict_by_name(bigger, sd, strict=False)
    assert torch.equal(bigger.state[named[0][1]]["sum"], torch.full_like(named[0][1], 0.5))


def test_any_of_the_three_forms_loads_by_name():
    m = model()
    sd = trained(m)
    saved = _saved_exp_avg(sd)
    reversed_named = list(reversed(list(m.named_parameters())))
    for form in (to_name_keyed(sd), to_flat(sd)):
        opt = torch.optim.AdamW(reversed_named, lr=0.1)
        load_state_dict_by_name(opt, form)
        assert all(torch.equal(opt.state[p]["exp_avg"], saved[n]) for n, p in reversed_named)


class GroupCountedSGD(torch.optim.SGD):
    """Keeps its step counter in each param group, as pytorch-optimizer and schedulefree do: group state."""

    def step(self, closure=None):
        for group in self.param_groups:
            group["step"] = group.get("step", 0) + 1
        return super().step(closure)


def _group_counted(named, lrs=(0.1,)):
    groups = [{"params": named[i::len(lrs)], "lr": lr} for i, lr in enumerate(lrs)]
    return GroupCountedSGD(groups, momentum=0.9)


def test_a_groups_own_state_follows_its_parameters_into_new_groups_or_is_refused_where_they_disagree():
    m = model()
    named = list(m.named_parameters())
    saving = _group_counted(named)
    for _ in range(3):
        m(torch.randn(5, 4)).sum().backward()
        saving.step()
    sd = saving.state_dict()
    split = _group_counted(named, lrs=(0.01, 0.02))  # regrouped: options the new groups', the counter the saved one
    load_state_dict_by_name(split, sd)
    assert [(g["lr"], g["step"]) for g in split.param_groups] == [(0.01, 3), (0.02, 3)]
    sd["param_groups"] = [dict(sd["param_groups"][0], params=[0, 1], param_names=[n for n, _ in named[:2]]),
                          dict(sd["param_groups"][0], params=[2, 3], param_names=[n for n, _ in named[2:]], step=5)]
    merged = _group_counted(named)  # one group from two saved groups that counted 3 and 5 steps
    before = merged.state_dict()
    with pytest.raises(StateDictNameError, match="'step' differ"):
        load_state_dict_by_name(merged, sd)
    assert merged.state_dict() == before and "step" not in merged.param_groups[0]
    resumed = GroupCountedSGD([{"params": named[:2]}, {"params": named[2:]}], lr=0.3, momentum=0.9)
    load_state_dict_by_name(resumed, sd)
    assert [(g["lr"], g["step"]) for g in resumed.param_groups] == [(0.1, 3), (0.1, 5)]  # as saved, options too


def test_the_loading_optimizers_implementation_flags_survive_the_load():
    """A checkpoint holds what was learned, not how the loading optimizer computes: loaded by name, a fused AdamW keeps
    fused=True (and its foreach) where torch's own load takes the checkpoint's flags (finding F47), and the
    hyperparameters still come from the checkpoint."""
    m = model()
    sd = trained(m)  # saved by an AdamW with foreach=None, fused=None, capturable=False, lr 0.1
    sd["param_groups"][0]["lr"] = 0.05
    named = list(m.named_parameters())
    mine = torch.optim.AdamW(named, lr=0.1, fused=True)
    load_state_dict_by_name(mine, sd)
    assert mine.param_groups[0]["fused"] is True and mine.param_groups[0]["lr"] == 0.05
    theirs = torch.optim.AdamW(named, lr=0.1, fused=True)
    theirs.load_state_dict(sd)
    assert theirs.param_groups[0]["fused"] is None  # torch's loader: the checkpoint's flag (F47)
    for p in m.parameters():
        p.grad = torch.ones_like(p)
    mine.step()  # the fused CPU kernel steps the loaded state


def test_a_one_element_vector_a_library_keeps_for_every_parameter_fits_a_0_dim_one():
    """bitsandbytes' LAMB keeps unorm_vec, shape (1,), for every parameter, a 0-dim one too: it fits there as it fits
    a vector (a factor of its shape); a vector of two elements does not, nor a (1,) under a parameter-shaped key."""
    from optbench.state.validation import shape_mismatch

    scalar = torch.nn.Parameter(torch.tensor(1.0))
    assert shape_mismatch({"unorm_vec": torch.zeros(1)}, scalar) == ""
    assert "has shape (2,)" in shape_mismatch({"unorm_vec": torch.zeros(2)}, scalar)
    assert "has shape (1,)" in shape_mismatch({"exp_avg": torch.zeros(1)}, scalar)


NATIVE: dict[int, str] = {}  # a native library's registry of optimizer objects, by the id each optimizer holds


class NativeHandleSGD(torch.optim.SGD):
    """Holds an id into a registry it frees in ``__del__`` (DeepSpeed's CPU optimizers: ``destroy_adam(opt_id)``)."""

    def __init__(self, params, **kwargs):
        super().__init__(params, **kwargs)
        self.opt_id = len(NATIVE)
        NATIVE[self.opt_id] = "native optimizer"

    def step(self, closure=None):
        assert self.opt_id in NATIVE, "the native optimizer was freed under the live one"
        return super().step(closure)

    def __del__(self):
        NATIVE.pop(self.opt_id, None)


def test_a_name_aware_load_leaves_an_optimizer_that_frees_a_native_handle_in_del_working():
    """name_aware's trial load probes a copy sharing the optimizer's attributes: collected, that copy must not run
    the class's __del__ (which freed the live optimizer's native object: DeepSpeed then dereferenced null)."""
    import gc

    model = torch.nn.Linear(3, 2)
    opt = NativeHandleSGD(model.named_parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    saved = opt.state_dict()
    name_aware(opt)
    opt.load_state_dict(saved)
    gc.collect()
    model(torch.randn(4, 3)).sum().backward()
    opt.step()


def test_a_stack_of_parameter_shaped_buffers_fits_its_parameter_and_no_other():
    """bitsandbytes' AdEMAMix keeps its two EMAs as one state1 of shape (2, *p.shape): read from the saved state as a
    stack of two, each parameter's must be (2, *its shape); another parameter's stack is refused as any misfit is."""
    from optbench.state.validation import saved_stacks, shape_mismatch

    weight, bias = torch.zeros(4, 3), torch.zeros(5)
    states = [{"state1": torch.zeros(2, 4, 3), "step": torch.tensor(1.0)}, {"state1": torch.zeros(2, 5)}]
    stacks = saved_stacks(states)
    assert stacks == {"state1": 2}
    assert shape_mismatch(states[0], weight, stacks=stacks) == ""
    assert shape_mismatch(states[1], bias, stacks=stacks) == ""
    assert "has shape (2, 5), not (2, 4, 3)" in shape_mismatch(states[1], weight, stacks=stacks)
    assert "has shape (2, 4, 3)" in shape_mismatch(states[0], weight)  # without the saved state's evidence: refused
    assert saved_stacks([{"state1": torch.zeros(2, 4, 3)}, {"state1": torch.zeros(3, 5)}]) == {}  # no one k
    assert saved_stacks([{"state1": torch.zeros(2, 4)}, {"state1": torch.zeros(2, 4)}]) == {}  # one shape: no evidence
    assert saved_stacks([{"exp_avg": torch.zeros(2, 4)}, {"exp_avg": torch.zeros(2, 5)}]) == {}  # parameter-shaped


def test_bitsandbytes_8bit_state_fits_by_its_maps_and_block_scales_and_another_parameters_does_not():
    """bitsandbytes' 8-bit state nests, beside uint8 codes of the parameter's shape, quantization maps of 256 entries
    for every parameter and one absmax per block of 256 elements: each is held to that, so a parameter's state fits
    it, and state saved for a parameter of another size is refused (its block scales, or its codes, misfit)."""
    from optbench.state.validation import shape_mismatch

    def quantized(shape) -> dict:
        blocks = -(-torch.Size(shape).numel() // 256)
        return {"step": 3, "__bnb_optimizer_quant_state__": {
            "state1": torch.zeros(shape, dtype=torch.uint8), "qmap1": torch.zeros(256), "absmax1": torch.zeros(blocks),
            "state2": torch.zeros(shape, dtype=torch.uint8), "qmap2": torch.zeros(256), "absmax2": torch.zeros(blocks)}}

    def mismatch(state: dict, param) -> str:
        from optbench.state.validation import flattened

        return shape_mismatch(flattened(state), param)

    wide, tall, odd = torch.zeros(128, 64), torch.zeros(64, 128), torch.zeros(70, 70)
    assert mismatch(quantized((128, 64)), wide) == "" and mismatch(quantized((70, 70)), odd) == ""  # 20 blocks: 4900
    assert "state1 has shape (128, 64)" in mismatch(quantized((128, 64)), tall)  # the codes: another shape
    assert "absmax1 has shape (32,), not (20,), one scale per block of 256" in mismatch(
        {"__bnb_optimizer_quant_state__": {"absmax1": torch.zeros(32)}}, odd)  # another parameter's scales
    assert "qmap2 has shape (16,), not (256,), a quantization map" in mismatch(
        {"__bnb_optimizer_quant_state__": {"qmap2": torch.zeros(16)}}, wide)


def test_8bit_codes_of_stacked_buffers_take_a_row_of_block_scales_each():
    """bitsandbytes' AdEMAMix8bit keeps its two EMAs stacked, codes (2, *p.shape) and absmax (2, blocks): the scales
    fit where the saved state's codes are stacked as high (``saved_stacks``), and nowhere else."""
    from optbench.state.validation import BNB_QUANT, flattened, saved_stacks, shape_mismatch

    def stacked(shape, high=2) -> dict:
        blocks = -(-torch.Size(shape).numel() // 256)
        return {"__bnb_optimizer_quant_state__": {"state1": torch.zeros(high, *shape, dtype=torch.uint8),
                                                  "absmax1": torch.zeros(high, blocks), "qmap1": torch.zeros(256)}}

    saved = [flattened(stacked((128, 64))), flattened(stacked((70, 70)))]
    stacks = saved_stacks(saved)
    assert stacks[BNB_QUANT + "state1"] == 2
    assert shape_mismatch(saved[0], torch.zeros(128, 64), stacks=stacks) == ""
    other = {BNB_QUANT + "state1": torch.zeros(2, 70, 70, dtype=torch.uint8), BNB_QUANT + "absmax1": torch.zeros(2, 32)}
    assert ("absmax1 has shape (2, 32), not (20,), one scale per block of 256 elements, or (2, 20) for its 2 stacked "
            "buffers") in shape_mismatch(other, torch.zeros(70, 70), stacks=stacks)  # another parameter's scales
    unstacked = {BNB_QUANT + "absmax1": torch.zeros(2, 32)}  # a row per buffer, but its codes are not stacked
    assert "absmax1 has shape (2, 32), not (32,)" in shape_mismatch(unstacked, torch.zeros(128, 64), stacks={})

def test_8bit_state_at_the_top_of_a_parameters_state_fits_by_its_codes_and_one_block_size():
    """Another library's 8-bit block-wise state kept unnested (codes, maps and block scales at the top level, as
    optbench's own 8-bit mutants keep it): beside uint8 codes of the parameter's shape, a 256-entry map and one scale
    per block of one power-of-two size fit; scales of two block sizes, scales without codes, codes of another shape
    and a map that is not float are refused."""
    from optbench.state.validation import shape_mismatch

    wide = torch.zeros(128, 32)  # 4096 elements: 16 blocks of 256

    def state(**changed) -> dict:
        codes = torch.zeros(128, 32, dtype=torch.uint8)
        return {"step": 3, "state1": codes, "absmax1": torch.zeros(16), "qmap1": torch.zeros(256),
                "state2": codes.clone(), "absmax2": torch.zeros(16), "qmap2": torch.zeros(256), **changed}

    assert shape_mismatch(state(), wide) == "" and shape_mismatch(state(absmax1=torch.zeros(8),
                                                                        absmax2=torch.zeros(8)), wide) == ""  # 512
    assert "absmax1 has shape (16,), not a float vector beside the state's 8-bit codes" in shape_mismatch(
        state(absmax2=torch.zeros(8)), wide)  # 256 and 512: no one block size
    assert "absmax1 has shape (16,), the parameter has (128, 32)" in shape_mismatch(
        {"exp_avg": torch.zeros(128, 32), "absmax1": torch.zeros(16)}, wide)  # no codes: not quantized state
    assert "state1 has shape (128, 32), the parameter has (256, 16)" in shape_mismatch(state(), torch.zeros(256, 16))
    assert "(it holds torch.int64)" in shape_mismatch(state(qmap1=torch.zeros(256, dtype=torch.int64)), wide)
