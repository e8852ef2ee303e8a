"""The data access, one store per aggregate over the same pool: `CorpusStore` (store.corpora) holds
the corpora (passages, their state, ingest's writes and retrieval), `GuardStore` (store.guards) the guards'
tables (API keys, rate-limit windows, the answer cache and the spend ledger) and `FeedbackStore`
(store.feedback) readers' verdicts and the recent responses they rate. `Store` is all three, for what needs
more than one: the running service and the CLI. Every SQL statement the service runs lives in these
modules, with bind parameters."""

from __future__ import annotations

from provenance.store.corpora import CorpusStore
from provenance.store.feedback import FeedbackStore
from provenance.store.guards import GuardStore


class Store(CorpusStore, GuardStore, FeedbackStore):
    """Both stores over one pool, for what uses both: the service (its pipeline reads the corpora, its guards
    their tables) and the CLI. Everything else takes the one it needs."""
