"""``stochastic_rounding``: the parameter dtypes whose values the candidate rounds stochastically, e.g. ``[bfloat16]``
(torchao's ``_AdamW(bf16_stochastic_round=True)``, with ``fixed: {bf16_stochastic_round: true}``). A rounding that
is random cannot be compared value by value: at those dtypes the ``stochastic`` check draws one step many times from
one state and judges the draws in distribution (``optbench.numerics.stochastic_rounding``). bfloat16 only: the
reference of the rounding (``reference/_stochastic_rounding.py``) is bfloat16's.
"""

from __future__ import annotations

from optbench.adapters.registry import CandidateSpecError, adapter_key

ROUNDED = ("bfloat16",)  # the dtypes a stochastic rounding's reference exists for


@adapter_key("stochastic_rounding")
def parse(value, source: str) -> tuple[str, ...]:
    names = [value] if isinstance(value, str) else list(value or ())
    bad = [str(n) for n in names if str(n) not in ROUNDED]
    if bad or not names:
        raise CandidateSpecError(f"{source}: stochastic_rounding: {', '.join(bad) or 'an empty list'}: "
                                 f"one of {', '.join(ROUNDED)}")
    return tuple(str(n) for n in names)


def rounds_stochastically(spec, dtype: str) -> bool:
    """Whether the candidate's spec says it rounds parameters of ``dtype`` stochastically."""
    return spec is not None and dtype in ((spec.extra or {}).get("stochastic_rounding") or ())
