"""Provenance: grounded question answering that refuses when its documents don't support an answer."""

__version__ = "0.1.0"
