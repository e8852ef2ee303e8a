-- Documents uploaded through the API (issue 45), kept whole so that a corpus can be rebuilt when the reader or
-- the embedder changes. A document's passages are `{id}/{file name}#{slug}`: the id (random) keeps two uploads
-- of one file name apart. Only the documents an ingest job took in are here: a file it refused is not.
CREATE TABLE documents (
    corpus      text NOT NULL,
    id          text NOT NULL,
    -- As the client named it: metadata only, never a path on this server.
    file_name   text NOT NULL,
    format      text NOT NULL,
    bytes       integer NOT NULL CHECK (bytes >= 0),
    sha256      text NOT NULL,
    original    bytea NOT NULL,
    added_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (corpus, id)
);
CREATE INDEX documents_corpus_sha_idx ON documents (corpus, sha256);

-- An upload's files, as sent, until its job has decided each one (then they are documents, or refused).
CREATE TABLE job_uploads (
    job_id      text NOT NULL REFERENCES ingest_jobs (id) ON DELETE CASCADE,
    position    integer NOT NULL,
    file_name   text NOT NULL,
    original    bytea NOT NULL,
    PRIMARY KEY (job_id, position)
);
