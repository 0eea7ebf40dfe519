"""``optbench coverage``: coverage against PyTorch's own optimizer tests: which of torch's option sets and error inputs
(``torch.testing._internal.common_optimizers``) an optbench suite covers.

An option set is covered when some param group of some hparam set of the optimizer's suite has
exactly the same hyperparameters once both are completed with the constructor's defaults
(implementation flags such as ``foreach`` aside: every suite runs every implementation). A Tensor
hyperparameter matches a Tensor of the same value. Importing torch's test helpers needs the
``expecttest`` package (``pip install optbench[test]``).
"""

from __future__ import annotations

import re

import torch

from optbench.hyperparameters import IMPLEMENTATION_FLAGS, constructor_defaults, is_tensor_form, plain
from optbench.suite.catalog import optimizer_suite_names, resolve, suite_files
from optbench.suite.spec import Suite
from optbench.usage import EXIT_OK, UsageError


def _key(value):
    """A hashable, comparable form of a hyperparameter (Tensor -> ("tensor", shape, value))."""
    value = plain(value)
    if is_tensor_form(value):
        value = torch.tensor(value["tensor"])
    if isinstance(value, torch.Tensor):
        return ("tensor", tuple(value.shape), round(float(value.reshape(-1)[0]), 12))
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if isinstance(value, float) or isinstance(value, int) and not isinstance(value, bool):
        return round(float(value), 12)
    return value


def _full(options: dict, defaults: dict) -> tuple:
    merged = {**defaults, **{k: v for k, v in plain(options).items() if k not in IMPLEMENTATION_FLAGS}}
    return tuple(sorted((k, _key(v)) for k, v in merged.items()))


def covered_option_sets(suite: Suite) -> dict[tuple, str]:
    """Every full option set a suite runs -> "hparam set[/group i]"."""
    defaults = constructor_defaults(suite.optimizer_class())
    out = {}
    for hset in suite.hparams:
        for i, options in enumerate(hset.group_options()):
            out.setdefault(_full(options, defaults), hset.name + (f"/group {i}" if i else ""))
    return out


def torch_db():
    from torch.testing._internal.common_optimizers import optim_db  # needs expecttest

    return optim_db


def option_set_coverage(device: str = "cpu") -> list[dict]:
    """One row per option set torch's tests use on ``device``: optimizer, desc, kwargs, covered_by."""
    suites = {s.optimizer: s for s in resolve_all()}
    rows = []
    for info in torch_db():
        cls = info.optim_cls
        suite = suites.get(cls.__name__)
        ours = covered_option_sets(suite) if suite else {}
        for oi in info.optim_inputs_func(device=device, dtype=torch.float32):
            key = _full(oi.kwargs, constructor_defaults(cls))
            rows.append({"optimizer": cls.__name__, "desc": oi.desc, "kwargs": oi.kwargs,
                         "covered_by": ours.get(key, "")})
    return rows


def error_input_coverage(device: str = "cpu") -> list[dict]:
    """One row per error input torch's tests use: optimizer, desc, covered_by (our error input's desc)."""
    from optbench.checks.error_inputs import GENERIC

    suites = {s.optimizer: s for s in resolve_all()}
    rows = []
    for info in torch_db():
        cls = info.optim_cls
        suite = suites.get(cls.__name__)
        ours = list(GENERIC) + list(suite.error_inputs if suite else ())
        for ei in info.optim_error_inputs_func(device=device, dtype=torch.float32):
            theirs = _text(ei.error_regex)
            hit = next((e.desc for e in ours
                        if _text(e.match) and (_text(e.match) in theirs or theirs in _text(e.match))), "")
            rows.append({"optimizer": cls.__name__, "desc": ei.optimizer_error_input.desc, "covered_by": hit})
    return rows


def _text(pattern: str) -> str:
    """A regex as the plain text it matches, near enough to compare two messages."""
    return re.sub(r"\\(.)", r"\1", re.sub(r"\.\*|\^|\$", "", pattern)).strip()


def resolve_all() -> list[Suite]:
    from omegaconf import OmegaConf

    files = suite_files()
    return [resolve(OmegaConf.create(files[name].read_text(encoding="utf-8")))[0] for name in optimizer_suite_names()]


def describe() -> str:
    options, errors = option_set_coverage(), error_input_coverage()
    lines = []
    for title, rows in (("option sets", options), ("error inputs", errors)):
        done = [r for r in rows if r["covered_by"]]
        lines.append(f"torch's {title} (common_optimizers, cpu): {len(done)} of {len(rows)} covered")
        lines += [f"  MISSING {r['optimizer']}: {r['desc']}" for r in rows if not r["covered_by"]]
    return "\n".join(lines)

def coverage_command(args: list[str]) -> int:
    if args:
        raise UsageError(f"'optbench coverage' takes no arguments, got {' '.join(args)}")
    print(describe())
    return EXIT_OK
