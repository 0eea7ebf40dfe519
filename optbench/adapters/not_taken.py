"""``not_taken``: the reference's options a class's ``**kwargs`` accepts and keeps without acting on them
(pytorch-optimizer's Muon keeps ``adjust_lr_fn`` in its defaults and steps with its own ``use_adjusted_lr``): an
hparam set that names one is ``unsupported`` for the class, as for an option its constructor lacks, instead of a
run that judges it at an option it ignored. Default ``[]``: every option ``**kwargs`` keeps counts as taken
(``optbench.hyperparameters.takes``).
"""

from __future__ import annotations

from optbench.adapters.registry import CandidateSpecError, adapter_key


@adapter_key("not_taken")
def parse(value, source: str) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else list(value or ())
    if not all(isinstance(n, str) and n for n in names):
        raise CandidateSpecError(f"{source}: not_taken: {value!r}: need option names, e.g. [adjust_lr_fn]")
    return tuple(names)
