"""The run engine: cases, the runner, results written and read, run history, sweeps, mutant trials."""
