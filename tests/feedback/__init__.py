"""Tests of provenance.feedback."""
