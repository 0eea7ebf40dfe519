"""``rejects``: exception class names (a builtin's or torch's) that count as rejecting an invalid input, whatever
the message: the candidate rejects it in its own words. Default ``[]``; a name that is no exception class is a
usage error before anything runs.
"""

from __future__ import annotations

from optbench.adapters.registry import adapter_key


@adapter_key("rejects")
def parse(value, source: str) -> tuple[str, ...]:
    return tuple(str(e) for e in value or ())
