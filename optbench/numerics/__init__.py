"""Numerics: errors in eps, the one-step gate, trajectories stepped side by side, precision, master copies."""
