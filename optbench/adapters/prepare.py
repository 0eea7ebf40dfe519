"""``prepare``: methods called, without arguments, on every optimizer built, before it steps (schedulefree's
``[train]``, without which it refuses to step). A name or a list; default ``[]``.
"""

from __future__ import annotations

from optbench.adapters.registry import CandidateSpecError, adapter_key


def call_methods(spec, optimizer) -> None:
    """Call each of ``spec.prepare`` on a just-built ``optimizer``."""
    for method in spec.prepare:
        call = getattr(optimizer, method, None)
        if not callable(call):
            raise CandidateSpecError(f"{spec.source}: prepare: {type(optimizer).__name__} has no method {method}()")
        call()


@adapter_key("prepare", attach=call_methods)
def parse(value, source: str) -> tuple[str, ...]:
    methods = [] if value is None else [value] if isinstance(value, str) else list(value)
    return tuple(str(m) for m in methods)
