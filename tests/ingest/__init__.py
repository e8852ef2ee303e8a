"""Tests of provenance.ingest.folder: readers, chunking, corpora described and ingest itself."""
