-- Passages are the only thing the service may answer from. The embedding dimension is fixed here
-- (384: the offline all-MiniLM-L6-v2 and the hosted gte-small and bge-small all produce 384-d vectors);
-- a model of another size needs a migration, and ingest says so rather than storing garbage.
CREATE TABLE passages (
    id              text PRIMARY KEY,
    source          text NOT NULL,
    heading         text NOT NULL,
    position        integer NOT NULL,
    text            text NOT NULL,
    token_count     integer NOT NULL CHECK (token_count >= 0),
    embedding       vector(384) NOT NULL,
    embedding_model text NOT NULL,
    content_hash    text NOT NULL,
    tsv             tsvector GENERATED ALWAYS AS (to_tsvector('english', heading || ' ' || text)) STORED,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX passages_source_idx ON passages (source);
CREATE INDEX passages_tsv_idx ON passages USING gin (tsv);

-- One row: what the passages currently are. `version` feeds the answer-cache key; `fingerprint`
-- (a hash of the files as read) lets a restart skip ingest without loading the embedder.
CREATE TABLE corpus_state (
    singleton       boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version         text NOT NULL,
    embedding_model text NOT NULL,
    fingerprint     text NOT NULL,
    passage_count   integer NOT NULL,
    files           jsonb NOT NULL DEFAULT '[]'::jsonb,
    ingested_at     timestamptz NOT NULL DEFAULT now()
);
