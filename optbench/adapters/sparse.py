"""``sparse``: ``false`` where the class documents that it takes no sparse gradients (pytorch-optimizer's
NoSparseGradientError): an hparam set whose workload gives sparse gradients is then ``unsupported`` for it, saying
so, as a torch variant that refuses them by design is left out of such a set. Default ``true``: it is judged on them.
"""

from __future__ import annotations

from optbench.adapters.registry import CandidateSpecError, adapter_key


@adapter_key("sparse")
def parse(value, source: str) -> bool:
    if value is None:
        return True
    if not isinstance(value, bool):
        raise CandidateSpecError(f"{source}: sparse: {value!r}: need true or false (whether it takes sparse gradients)")
    return value


def refused(spec, workload) -> str:
    """Why the candidate does not run on ``workload`` ("" if it does): its gradients are sparse and its spec says
    ``sparse: false``."""
    if spec is None or (spec.extra or {}).get("sparse", True):
        return ""
    if any(getattr(g, "indices", None) is not None for step in workload.grads for g in step.values()):
        return "its candidate spec says it takes no sparse gradients (sparse: false), and this set's are sparse"
    return ""
