"""Helpers for one third-party library each, named from a candidate spec by dotted path (a state decoder)."""
