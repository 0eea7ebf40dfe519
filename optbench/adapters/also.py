"""``also``: other classes the spec adapts as it adapts ``class``: the same code under another name, such as
bitsandbytes' ``Paged*`` optimizers (on CPU they page nothing and step as the class they are named after). A
candidate named in ``also`` is judged with this spec, and the suite's declarations that name ``class`` cover it too.
Default ``()``.
"""

from __future__ import annotations

from optbench.adapters.registry import CandidateSpecError, adapter_key


@adapter_key("also")
def parse(value, source: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and "." in v for v in value):
        raise CandidateSpecError(f"{source}: also: a list of dotted class paths (the same code under other names)")
    return tuple(value)


def named(spec, dotted_path: str) -> bool:
    """Whether ``spec`` adapts ``dotted_path`` under ``also``."""
    return dotted_path in (spec.extra or {}).get("also", ())
