"""Suites: their spec, the catalogue of suite files, hyperparameters, lr schedules, coverage of torch's tests."""
