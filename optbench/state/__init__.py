"""Optimizer state dicts: loading by parameter name, formats, batched state, round-trip scenarios, positional loads,
resharding."""
