"""Bring your own optimizer: a worked example of a third-party optimizer (Lion) checked by optbench
with its own suite file (conf/suite/lion.yaml) and its own NumPy reference (lion_reference.py)."""
