"""A candidate spec's keys are the adapter registry's: docs/suites.md lists exactly those, a key registered from
outside (a library's) is read like the built-in ones, and an unknown key is one line naming the allowed ones."""

import re
import sys
from pathlib import Path

import pytest

from optbench.adapters.registry import CandidateSpecError, adapter_key, unregister
from optbench.adapters.spec import KEYS, CandidateSpec

PAGE = (Path(__file__).parents[1] / "docs" / "suites.md").read_text()


def documented_keys() -> set[str]:
    """The first column of docs/suites.md's "A candidate spec" table."""
    section = PAGE.split("\n## A candidate spec")[1].split("\n## ")[0]
    return set(re.findall(r"^\| `([^`]+)` \|", section, flags=re.M))


@pytest.fixture
def importable(tmp_path, monkeypatch, request):
    """``importable(name)``: ``tmp_path/<name>.py`` (written by the test) importable for the test, forgotten after;
    ``importable(name, source, spec)`` also writes it from ``source`` and returns ``tmp_path/<name>.yaml``, a
    candidate spec holding ``spec``."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def add(name: str, source: str | None = None, spec: str | None = None) -> Path | None:
        request.addfinalizer(lambda: sys.modules.pop(name, None))
        if source is not None:
            (tmp_path / f"{name}.py").write_text(source)
        if spec is None:
            return None
        (tmp_path / f"{name}.yaml").write_text(spec)
        return tmp_path / f"{name}.yaml"

    return add


def test_the_docs_list_exactly_the_registered_keys():
    documented, registered = documented_keys(), set(KEYS)
    assert documented == registered, (f"registered but not in docs/suites.md: {sorted(registered - documented)}; "
                                      f"in docs/suites.md but not registered: {sorted(documented - registered)}")


def test_a_key_registered_from_outside_is_parsed_and_unregistered_cleanly():
    @adapter_key("toy")
    def parse(value, source):
        if not isinstance(value, int):
            raise CandidateSpecError(f"{source}: toy={value!r}: an integer")
        return value * 2

    try:
        spec = CandidateSpec.from_mapping({"class": "x.Y", "toy": 21}, "spec.yaml")
        assert spec.extra == {"toy": 42} and spec.cls == "x.Y"
        assert CandidateSpec.from_mapping({"class": "x.Y"}, "spec.yaml").extra == {}  # left out: not parsed
        with pytest.raises(CandidateSpecError, match="spec.yaml: toy='many': an integer"):
            CandidateSpec.from_mapping({"class": "x.Y", "toy": "many"}, "spec.yaml")
        with pytest.raises(ValueError, match="registered twice"):
            adapter_key("toy")(parse)
    finally:
        unregister("toy")
    assert "toy" not in KEYS
    with pytest.raises(CandidateSpecError, match="unknown key.s. toy"):
        CandidateSpec.from_mapping({"class": "x.Y", "toy": 21}, "spec.yaml")


def test_an_unknown_key_is_one_line_naming_the_allowed_ones():
    with pytest.raises(CandidateSpecError) as raised:
        CandidateSpec.from_mapping({"class": "x.Y", "renme": {"weight_decay": "wd"}}, "spec.yaml")
    message = str(raised.value)
    assert len(message.splitlines()) == 1
    assert message == f"spec.yaml: unknown key(s) renme; allowed: {', '.join(sorted(KEYS))}"


def test_a_float32_only_candidate_declares_its_dtypes_and_is_skipped_elsewhere_not_failed(tmp_path, importable):
    """A candidate that computes in float32 only: without ``dtypes:`` its float64 case fails; with it, that case is a
    skip naming the spec, and its float32 case passes."""
    import json

    from optbench.cli import main

    spec = importable("f32", (
        "import torch\n\nclass SGD(torch.optim.SGD):\n    @torch.no_grad()\n    def step(self, closure=None):\n"
        "        for group in self.param_groups:\n            for p in group['params']:\n"
        "                if p.grad is not None:\n"
        "                    p.add_(p.grad.float().mul(-group['lr']).to(p.dtype))\n"),
        "class: f32.SGD\ndtypes: [float32]\n")
    common = ["run", "suite=sgd", "impl=[candidate]", "dtype=[float64,float32]", "checks=[parity]",
              "options={lr: 0.1}", "steps=3"]
    assert main([*common, "candidate=f32.SGD", f"out_dir={tmp_path / 'plain'}"]) == 1
    plain = json.loads((tmp_path / "plain" / "results.json").read_text())["rows"]
    assert {(r["dtype"], r["status"]) for r in plain if r["metric"] == "parity.max_err_eps" and not r["fqn"]} == {
        ("float64", "fail"), ("float32", "pass")}
    assert main([*common, f"candidate={spec}", f"out_dir={tmp_path / 'declared'}"]) == 0
    rows = json.loads((tmp_path / "declared" / "results.json").read_text())["rows"]
    skipped = [r for r in rows if r["dtype"] == "float64" and r["status"] == "skip"]
    assert skipped and "supports float32 only (dtypes:)" in skipped[0]["detail"]


def test_options_held_at_lower_precision_are_rounded_for_the_reference_only_where_declared(tmp_path, importable):
    """An Adam that keeps its betas as float32 values: at float64 its departure is rounding of the betas alone, a
    failure without ``held_as`` and a pass with ``held_as: {betas: float32}``; a real bug still fails with it."""
    import json

    from optbench.cli import main

    (tmp_path / "f32betas.py").write_text(
        "import torch\n\ndef f32(b):\n    return float(torch.tensor(b, dtype=torch.float32))\n\n"
        "class Adam(torch.optim.Adam):\n    def __init__(self, params, betas=(0.9, 0.999), **kw):\n"
        "        super().__init__(params, betas=(f32(betas[0]), f32(betas[1])), **kw)\n\n"
        "class BuggyAdam(Adam):\n    def __init__(self, params, eps=1e-8, **kw):\n"
        "        super().__init__(params, eps=eps * 1e3, **kw)\n")
    for name, cls in (("held", "Adam"), ("buggy", "BuggyAdam")):
        (tmp_path / f"{name}.yaml").write_text(f"class: f32betas.{cls}\nheld_as: {{betas: float32}}\n")
    importable("f32betas")
    common = ["run", "suite=adam", "impl=[candidate]", "dtype=float64", "checks=[parity]", "hparams=first",
              "steps=10"]
    for out, candidate, code in (("plain", "f32betas.Adam", 1), ("held", tmp_path / "held.yaml", 0),
                                 ("buggy", tmp_path / "buggy.yaml", 1)):
        assert main([*common, f"candidate={candidate}", f"out_dir={tmp_path / out}"]) == code, out
        rows = json.loads((tmp_path / out / "results.json").read_text())["rows"]
        assert not [r for r in rows if r["status"] == "error"], out
        assert [r["status"] for r in rows if r["metric"] == "parity.max_err_eps" and not r["fqn"]] == [
            "fail" if code else "pass"], out
    meta = json.loads((tmp_path / "held" / "results.json").read_text())["candidate"]
    assert meta["class"] == "f32betas.Adam"


@pytest.mark.slow  # (slow tier; CI keeps the other adapter keys)
def test_an_option_the_class_fixes_by_convention_is_taken_at_that_value_and_unsupported_elsewhere(tmp_path, importable):
    """A class that always decays decoupled (AdamW behind a constructor without the flag): with ``conventions`` a set
    naming the flag at the class's value runs and passes, one asking for the other value is unsupported in one line
    naming the convention; without the spec the first is unsupported (no such argument)."""
    import json

    from optbench.cli import main

    spec = importable("always", (
        "import torch\n\nclass DecoupledAdam(torch.optim.AdamW):\n"
        "    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):\n"
        "        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)\n"),
        "class: always.DecoupledAdam\nconventions: {decoupled_weight_decay: true}\n")

    def verdicts(candidate: str, out: str, *extra) -> dict:
        code = main(["run", "suite=adam", "impl=[candidate]", "dtype=float32", "checks=[parity]", "steps=3",
                     f"candidate={candidate}", f"out_dir={tmp_path / out}", *extra])
        rows = json.loads((tmp_path / out / "results.json").read_text())["rows"]
        return code, {r["hparams"]: (r["status"], r["detail"]) for r in rows if r["fqn"] == ""
                      and r["metric"] in ("parity.max_err_eps", "case.unsupported")}

    code, declared = verdicts(str(spec), "declared", "hparams=[decoupled_weight_decay,weight_decay]")
    assert code == 0 and {h: s for h, (s, _) in declared.items()} == {"decoupled_weight_decay": "pass",
                                                                        "weight_decay": "pass"}
    code, other = verdicts(str(spec), "other", "options={weight_decay: 0.1, decoupled_weight_decay: false}")
    assert other["options"][0] == "unsupported"
    assert "its class always does decoupled_weight_decay=True (conventions)" in other["options"][1]
    code, plain = verdicts("always.DecoupledAdam", "plain", "hparams=[decoupled_weight_decay]")
    assert plain["decoupled_weight_decay"][0] == "unsupported"


def test_each_gives_every_argument_the_whole_value_and_reads_back_only_where_they_agree():
    from optbench.adapters import rename

    spelled = rename.parse({"t_alpha_beta3": {"each": ["t_alpha", "t_beta3"]}}, "spec")
    assert rename.renamed(spelled, {}, {"t_alpha_beta3": 12, "lr": 0.1}, "spec") == {
        "t_alpha": 12, "t_beta3": 12, "lr": 0.1}
    assert rename.arguments(spelled, "t_alpha_beta3") == ["t_alpha", "t_beta3"]
    assert rename.value_in(spelled, "t_alpha_beta3", {"t_alpha": 12, "t_beta3": 12}) == 12
    assert rename.value_in(spelled, "t_alpha_beta3", {"t_alpha": 12, "t_beta3": 5}, missing="?") == "?"
    assert rename.as_reference(spelled, {}, {"t_alpha": None, "t_beta3": None, "lr": 0.1}) == {
        "t_alpha_beta3": None, "lr": 0.1}


def test_group_options_reach_every_param_group_and_never_override_a_sets_own(tmp_path, importable):
    """A class that refuses a param group without its flag (pytorch-optimizer's Muon and ``use_muon``) is built with
    the flag in every group the harness builds; a hyperparameter set's group option of that name wins."""
    from optbench.adapters import group_options
    from optbench.adapters.registry import CandidateSpecError
    from optbench.adapters.spec import CandidateSpec

    spec = CandidateSpec.from_mapping({"class": "torch.optim.SGD", "group_options": {"use_muon": True}}, "spec")
    assert spec.group_options == {"use_muon": True}
    assert group_options.carried(spec.group_options, {"params": [], "lr": 0.1}) == {
        "use_muon": True, "params": [], "lr": 0.1}
    assert group_options.carried(spec.group_options, {"params": [], "use_muon": False})["use_muon"] is False
    with pytest.raises(CandidateSpecError, match="params is the parameters"):
        CandidateSpec.from_mapping({"class": "torch.optim.SGD", "group_options": {"params": 1}}, "spec")

    (tmp_path / "flagged.py").write_text(
        "import torch\n\nclass SGD(torch.optim.SGD):\n    def __init__(self, params, lr=1e-3, **kwargs):\n"
        "        if not isinstance(params, torch.Tensor):  # torch's own error for a bare Tensor\n"
        "            params = list(params)\n"
        "            if not all(isinstance(g, dict) and g.get('flag') is True for g in params):\n"
        "                raise ValueError('`flag` must be set.')\n"
        "        super().__init__(params, lr=lr, **kwargs)\n")
    spec_file = tmp_path / "flagged.yaml"
    spec_file.write_text("class: flagged.SGD\ngroup_options: {flag: true}\n")

    from tests.conftest import run_inline

    importable("flagged")
    common = ["suite=sgd", "impl=[candidate]", "dtype=float32", "checks=[parity]", "steps=3",
              "hparams=[default]", "history_dir=null"]
    assert run_inline([*common, f"candidate={spec_file}", f"out_dir={tmp_path / 'with'}"]) == 0
    assert run_inline([*common, "candidate=flagged.SGD", f"out_dir={tmp_path / 'without'}"]) != 0
    # its error inputs are built with the flag too: each is refused in the class's own words, not for a missing flag
    errors = [*common[:3], "checks=[errors]", "history_dir=null", f"candidate={spec_file}"]
    assert run_inline([*errors, f"out_dir={tmp_path / 'errors'}"]) == 0


def test_group_hparams_go_into_every_param_group_and_never_to_the_constructor(tmp_path, importable):
    """A class that steps by each group's lr while its constructor's lr belongs to another side (pytorch-optimizer's
    Muon for its AdamW groups): with ``group_hparams: [lr]`` the reference's default and the set's lr go into every
    group (a group's own wins) and parity passes, error inputs included; without it the set's lr reaches the unused
    constructor argument and parity fails."""
    import json

    from optbench.adapters import group_hparams
    from optbench.adapters.registry import CandidateSpecError
    from optbench.adapters.spec import CandidateSpec
    from tests.conftest import run_inline

    assert group_hparams.into_groups(("lr",), {"lr": 0.1, "momentum": 0.9}, [{"params": []}, {"params": [], "lr": 1}]) \
        == ({"momentum": 0.9}, [{"lr": 0.1, "params": []}, {"lr": 1, "params": []}])
    for wrong in (["params"], {"lr": 0.1}, [1]):
        with pytest.raises(CandidateSpecError, match="group_hparams"):
            CandidateSpec.from_mapping({"class": "torch.optim.SGD", "group_hparams": wrong}, "spec")
    spec = importable("sided", (
        "import torch\n\nclass SGD(torch.optim.SGD):\n"
        "    def __init__(self, params, lr=0.5, group_lr=0.25, **kwargs):\n"
        "        params = list(params)\n"
        "        dicts = all(isinstance(g, dict) for g in params)\n"
        "        groups = [dict(g) for g in params] if dicts else [{'params': params}]\n"
        "        for g in groups:\n"
        "            g.setdefault('lr', group_lr)\n"
        "            if g['lr'] < 0:\n"
        "                raise ValueError(f\"Invalid learning rate: {g['lr']}\")\n"
        "        super().__init__(groups, lr=0.5, **kwargs)  # its own lr is the other side's\n"),
        "class: sided.SGD\ngroup_hparams: [lr]\nnot_taken: [group_lr]\n")
    common = ["suite=sgd", "impl=[candidate]", "dtype=float32", "steps=3", "history_dir=null",
              "hparams=[default,lr,momentum_dampening_maximize_groups]"]
    assert run_inline([*common, "checks=[parity]", f"candidate={spec}", f"out_dir={tmp_path / 'with'}"]) == 0
    assert run_inline([*common, "checks=[parity]", "candidate=sided.SGD", f"out_dir={tmp_path / 'without'}"]) != 0
    # a negative lr, refused from its group; left to the constructor it is accepted (the other side's, unused)
    for name, keys, expected in (("routed", "group_hparams: [lr]\n", "pass"), ("unrouted", "", "fail")):
        (tmp_path / f"{name}.yaml").write_text(f"class: sided.SGD\n{keys}")
        run_inline(["suite=sgd", "impl=[candidate]", "checks=[errors]", "history_dir=null",
                    f"candidate={tmp_path / name}.yaml", f"out_dir={tmp_path / name}"])
        rows = json.loads((tmp_path / name / "results.json").read_text())["rows"]
        assert [r["status"] for r in rows if r["hparams"] == "a negative learning rate" and r["status"] != "info"
                and r["impl"].startswith("candidate")] == [expected]


def test_an_option_kwargs_keeps_but_never_acts_on_is_unsupported_where_the_spec_says_so(tmp_path, importable):
    """A class whose ``**kwargs`` keeps ``momentum`` in its defaults and steps without it: taken as it is, its momentum
    set runs and fails (the option was ignored); with ``not_taken: [momentum]`` that set is unsupported, saying why."""
    import json

    from tests.conftest import run_inline

    spec = importable("swallows", (
        "import torch\n\nclass SGD(torch.optim.SGD):\n    def __init__(self, params, lr=1e-3, **kwargs):\n"
        "        super().__init__(params, lr=lr)\n        self.defaults.update(kwargs)\n"),
        "class: swallows.SGD\nnot_taken: [momentum]\n")

    def case(candidate: str, out: str) -> dict:
        run_inline(["suite=sgd", "impl=[candidate]", "dtype=float32", "checks=[parity]", "steps=3",
                    "options={lr: 0.1, momentum: 0.9}", "history_dir=null", f"candidate={candidate}",
                    f"out_dir={tmp_path / out}"])
        rows = json.loads((tmp_path / out / "results.json").read_text())["rows"]
        return next(r for r in rows if r["fqn"] == "" and r["status"] != "info")

    assert case("swallows.SGD", "plain")["status"] == "fail"
    declared = case(str(spec), "declared")
    assert declared["status"] == "unsupported"
    assert "it keeps momentum without acting on it (candidate spec: not_taken)" in declared["detail"]


def test_a_class_named_in_also_is_adapted_and_declared_as_the_class_its_spec_names():
    """``also``: bitsandbytes' PagedAdam8bit is judged with Adam8bit's spec (its quantized state included), under its
    own name, and Adam8bit's declared findings cover it (F56); a class no spec names has none of them (on CPU, where
    bitsandbytes' library-wide CUDA findings, F77, are not declared)."""
    from optbench.implementations.adapter import Implementation
    from optbench.suite.catalog import suite_by_name

    adam = suite_by_name("adam").on_device("cpu")
    spec = adam.candidate_spec("bitsandbytes.optim.PagedAdam8bit")
    assert spec.cls == "bitsandbytes.optim.PagedAdam8bit"
    assert spec.extra["quantized"]["moments"] == adam.candidate_spec("bitsandbytes.optim.Adam8bit").extra[
        "quantized"]["moments"]
    assert adam.candidate_spec("bitsandbytes.optim.PagedAdam4bit") is None
    paged = Implementation("candidate:bitsandbytes.optim.PagedAdam8bit", None, is_candidate=True, spec=spec,
                           inherits_deviations=False)
    alone = Implementation("candidate:bitsandbytes.optim.PagedAdam4bit", None, is_candidate=True,
                           inherits_deviations=False)  # no spec names it
    assert "F56" in {d.finding for d in adam.deviations_for(paged, "float32", "weight_decay", check="quantized")}
    assert not adam.deviations_for(alone, "float32", "weight_decay", check="quantized")
    with pytest.raises(CandidateSpecError, match="also: a list of dotted class paths"):
        CandidateSpec.from_mapping({"class": "a.B", "also": "a.C"}, "spec")
