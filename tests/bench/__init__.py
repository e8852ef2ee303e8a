"""Tests of the bench/ scripts' judgements."""
