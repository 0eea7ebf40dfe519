"""The keys a suite file takes, level by level: what ``optbench.suite.spec`` parses and docs/suites.md lists
(tests/test_suite_keys.py holds the two equal). A key outside these is an error naming the allowed ones."""

from __future__ import annotations

SUITE = frozenset({
    "name", "optimizer", "reference", "description", "dtypes", "hparams", "roundtrip_hparams", "workload", "params",
    "workload_sizes", "reference_options", "update_precision", "one_step", "deviations", "error_inputs", "variants",
    "implementations", "candidate_named", "describes", "error_param_meta", "candidates", "roofline", "nearest",
    "speed_scale",
})
HPARAM_SET = frozenset({"name", "options", "groups", "dtypes", "workload", "impls", "note", "schedule", "torch"})
GROUP = frozenset({"match", "options"})
ONE_STEP = frozenset({"skip_dtypes", "note"})
ERROR_INPUT = frozenset({"desc", "options", "params", "raises", "match", "at", "grad", "meta"})
DEVIATION = frozenset({"finding", "reason", "impl", "dtype", "hparams", "fqn", "tensor", "raises", "max_err_eps",
                       "size", "kind", "intermittent", "check", "gate", "torch", "device", "exits",
                       "stderr"})


def check(c, allowed, what: str) -> None:
    """A typo in a suite file (or YAML reading ``on:`` as True) is an error, not a silent default."""
    unknown = sorted(str(k) for k in c.keys() if str(k) not in allowed)
    if unknown:
        raise ValueError(f"{what} has unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def declared_cost(value) -> dict:
    """A suite's ``roofline:`` (its algorithm's least traffic, for an optimizer ``optbench.perf.roofline`` has no
    model of):
    ``streams``, the parameter-sized passes a step must make (3 for p read and written and g read, plus 2 per
    state tensor of the parameter's size read and written), and optionally ``flops_per_param`` (matmul work,
    timed against the matmul ceiling). ValueError, in one line, for anything else."""
    if not value:
        return {}
    value = dict(value)
    unknown = set(value) - {"streams", "flops_per_param"}
    streams, flops = value.get("streams"), value.get("flops_per_param", 0)
    if unknown or not isinstance(streams, int) or isinstance(streams, bool) or streams < 3 \
            or not isinstance(flops, (int, float)) or flops < 0:
        raise ValueError(f"roofline: {value}: give streams (an integer >= 3: parameter-sized passes, p r/w + g r "
                         "= 3, +2 per state tensor) and optionally flops_per_param (a number >= 0)")
    return {"streams": streams, "flops_per_param": float(flops)}
