"""``error_inputs``: which of the suite's error inputs apply to the candidate: ``all`` (the default), ``none``, or
globs over the inputs' ``desc`` (one or a list).
"""

from __future__ import annotations

import fnmatch

from optbench.adapters.registry import adapter_key


@adapter_key("error_inputs")
def parse(value, source: str) -> tuple[str, ...] | None:
    """None: all apply; otherwise the globs (none: ``()``)."""
    if value == "all":
        return None
    if value in ("none", None):
        return ()
    return tuple(str(g) for g in ([value] if isinstance(value, str) else value))


def applies(globs: tuple[str, ...] | None, desc: str) -> bool:
    """Whether the error input described by ``desc`` applies under ``globs`` (None: all do)."""
    return globs is None or any(fnmatch.fnmatchcase(desc, g) for g in globs)
