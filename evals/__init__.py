"""Eval suites and the scripts that run them (`python -m evals.negative_rejection`, ...)."""
