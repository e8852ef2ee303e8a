"""Ingest as background jobs: the queue in Postgres (`queue`)."""
