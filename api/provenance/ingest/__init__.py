"""Ingest: documents read by format (documents/), chunked into passages, described, embedded and
written to a corpus."""
