"""Tests of provenance.judges."""
