"""Tests of provenance.evaluation."""
