"""Tests of provenance.store and the migrations."""
