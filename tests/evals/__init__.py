"""Tests of the evals/ scripts that need no model."""
