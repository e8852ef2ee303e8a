"""Tests of provenance.inference."""
