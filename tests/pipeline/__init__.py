"""Tests of provenance.pipeline.door: the door, admission and whole /ask runs per profile."""
