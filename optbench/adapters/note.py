"""``note``: the documented differences the spec adapts, in a sentence (shown in the report). Default ``""``."""

from __future__ import annotations

from optbench.adapters.registry import adapter_key


@adapter_key("note")
def parse(value, source: str) -> str:
    return " ".join(str(value).split())
