"""Performance: timing, the roofline and its ceilings, peak memory, and comparing two runs."""
