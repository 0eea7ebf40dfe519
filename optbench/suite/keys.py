"""The keys a suite file takes, level by level: what ``optbench.suite.spec`` parses and docs/suites.md lists
(tests/test_suite_keys.py holds the two equal). A key outside these is an error naming the allowed ones."""

from __future__ import annotations

SUITE = frozenset({
    "name", "optimizer", "reference", "description", "dtypes", "hparams", "roundtrip_hparams", "workload", "params",
    "workload_sizes", "reference_options", "update_precision", "one_step", "deviations", "error_inputs", "variants",
    "implementations", "candidate_named", "describes", "error_param_meta", "candidates", "roofline", "nearest",
})
HPARAM_SET = frozenset({"name", "options", "groups", "dtypes", "workload", "impls", "note", "schedule", "torch"})
GROUP = frozenset({"match", "options"})
ONE_STEP = frozenset({"skip_dtypes", "note"})
ERROR_INPUT = frozenset({"desc", "options", "params", "raises", "match", "at", "grad", "meta"})
DEVIATION = frozenset({"finding", "reason", "impl", "dtype", "hparams", "fqn", "tensor", "raises", "max_err_eps",
                       "size", "kind", "intermittent", "check", "gate", "torch", "device"})


def check(c, allowed, what: str) -> None:
    """A typo in a suite file (or YAML reading ``on:`` as True) is an error, not a silent default."""
    unknown = sorted(str(k) for k in c.keys() if str(k) not in allowed)
    if unknown:
        raise ValueError(f"{what} has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
