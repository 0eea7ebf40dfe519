"""User candidates: any importable optimizer class, checked against the suite's reference."""

from __future__ import annotations

import math

import torch

from optbench.adapters import group_hparams
from optbench.adapters.spec import CandidateSpec
from optbench.dotted import CandidateError, import_dotted
from optbench.hyperparameters import constructor_defaults, takes
from optbench.metrics import CASE_ERROR, PARITY_MAX_ERR_EPS
from optbench.results import NO_VERDICT
from optbench.results import row as result_row
from optbench.rows import first_words

from .adapter import Implementation


def load_optimizer_class(dotted_path: str, what: str = "candidate") -> type:
    cls = import_dotted(dotted_path, what)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise CandidateError(f"{what} {dotted_path!r} is not a torch.optim.Optimizer subclass")
    return cls


def candidate_implementation(spec: CandidateSpec, reference_defaults: dict,
                             kwargs: dict | None = None) -> Implementation:
    """The candidate ``spec`` names, built with the reference's value of every option its constructor names (the
    suite's defaults, under the spec's renames), then ``spec.fixed``, the hparam set's options, and ``kwargs``
    (candidate_kwargs) over all of them."""
    cls = load_optimizer_class(spec.cls)
    spec.decoder()  # a decoder that cannot be imported is the user's to fix before anything runs
    grouped = group_hparams.names_of(spec)  # read from the groups: the reference's defaults go there (build)
    base = {k: v for k, v in spec.renamed(reference_defaults).items()
            if k in grouped or takes(cls, k, through_kwargs=False)}
    # named by its dotted path: two classes of one name (a.Lion, b.Lion) never share a label in results
    return Implementation(f"candidate:{spec.cls}", cls, is_candidate=True,
                          extra_kwargs=dict(kwargs or {}), base_kwargs={**base, **spec.fixed}, spec=spec)


def rejected_at_construction(impl: Implementation, hset, params: dict, exc: BaseException) -> str:
    """Where a candidate's constructor raised ``exc`` on ``hset``'s options but takes the reference's defaults (the
    set without options of its own), it rejects those options in its own words: why it is unsupported, with its
    message. One that raises on the defaults too is broken, not selective: "" (the case is an error), unless it says
    it does not implement them (NotImplementedError: bitsandbytes' SGD without momentum)."""
    message = first_words(str(exc))
    try:
        type(hset)(name=hset.name, options={}).build(impl, params)
    except Exception:
        if isinstance(exc, NotImplementedError):
            return (f"unsupported by candidate: NotImplementedError at construction, on the reference's defaults "
                    f"too: {message}")
        return ""
    return (f"unsupported by candidate: it rejects {', '.join(sorted(hset.option_names()))} at construction: "
            f"{type(exc).__name__}: {message}")


def first_buildable(impl: Implementation, hparams, params: dict):
    """The first of ``hparams`` a candidate takes whole and its constructor accepts on ``params`` (None if none): the
    set its timing and memory are measured on, where the suite's first is not one of them."""
    for hset in hparams:
        if impl.options_not_taken(hset.option_names()):
            continue
        try:
            hset.build(impl, params)
        except Exception:
            continue
        return hset
    return None


def defaults_table(impl: Implementation, reference_defaults: dict) -> list[dict]:
    """Per option: the reference's value, the candidate's own default and what it is built with (``built``)."""
    spec, own = impl.spec, constructor_defaults(impl.optimizer_class)
    rows = []
    for option, value in reference_defaults.items():
        argument = spec.argument(option)
        taken = all(takes(impl.optimizer_class, a, through_kwargs=False) for a in spec.arguments(option))
        rows.append({"option": option, "argument": argument if taken else "", "reference": value,
                     "candidate": spec.value_in(option, own, "(no default)") if taken else "(not taken)",
                     "built": spec.value_in(option, impl.base_kwargs, "") if taken else ""})
    mapped = set(spec.renamed(reference_defaults))
    for argument, value in own.items():
        if argument not in mapped:
            rows.append({"option": "", "argument": argument, "reference": "(not an option of the reference)",
                         "candidate": value, "built": spec.fixed.get(argument, value)})
    for row in rows:
        placeholder = isinstance(row["candidate"], str) and row["candidate"] in ("(no default)", "(not taken)")
        own_default = row["option"] != "" and not placeholder  # a required argument has none to differ
        row["differs"] = own_default and not _same(row["candidate"], row["reference"])
    return rows


def _same(a, b) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # a Tensor default, say
        return False


def candidate_meta(impl: Implementation, reference_defaults: dict) -> dict:
    """What results.json and the report say of the candidate: its class, its spec, its defaults table."""
    def plain(v):  # JSON as results.json writes it (no inf or nan), anything else as its repr
        finite = isinstance(v, (bool, str, int)) or isinstance(v, float) and math.isfinite(v)
        return v if finite else repr(v)

    table = [{k: plain(v) for k, v in row.items()} for row in defaults_table(impl, reference_defaults)]
    spec = impl.spec
    adapter = {"rename": spec.rename, "fixed": {k: plain(v) for k, v in spec.fixed.items()},
               "conventions": {k: plain(v) for k, v in spec.conventions.items()}, "prepare": list(spec.prepare),
               "group options": {k: plain(v) for k, v in spec.group_options.items()},
               "not taken": list(spec.not_taken),
               "state keys": spec.state_keys, "state ignored": list(spec.ignore), "step": spec.step,
               "rejects": list(spec.rejects),
               "error inputs": "all" if spec.error_inputs is None else list(spec.error_inputs) or "none"}
    return {"name": impl.name, "class": spec.cls, "spec": spec.source, "note": spec.note, "defaults": table,
            "adapter": {k: v for k, v in adapter.items() if v not in ({}, [], "param", "all")}}


def defaults_warning(meta: dict) -> str:
    """One console line when the candidate's own defaults differ from the reference's values ("" if none do)."""
    differs = [f"{r['argument']}={r['candidate']} (reference {r['reference']})"
               for r in meta["defaults"] if r["differs"]]
    if not differs:
        return ""
    return (f"warning: {meta['name']}'s own defaults differ from the reference's: {', '.join(differs)}; it is built "
            "with the reference's values (report.md, 'Candidate')")


def unchecked(candidate: str, rows: list[dict], suite, device: str, echo) -> list[dict]:
    """A candidate the user asked to verify must have been checked by at least one parity case: else one ``error``
    row saying why (said through ``echo`` too), never a run that passes with its candidate unchecked."""
    mine = [r for r in rows if r["impl"] == candidate]
    if any(r["check"] == "parity" and r["metric"] == PARITY_MAX_ERR_EPS and r["fqn"] == "" for r in mine):
        return []
    why = sorted({r["detail"] for r in mine if r["status"] in NO_VERDICT | {"error"}})
    labels = {"suite": suite.name, "optimizer": suite.optimizer or "", "impl": candidate, "dtype": "",
              "hparams": "", "device": device}
    detail = "the candidate was not checked by any hparam set" + (f": {why[0]}" if why else "")
    echo(f"  ERROR {candidate}: {detail}")
    return [result_row(labels, check="parity", metric=CASE_ERROR, value=1, status="error", detail=detail)]
