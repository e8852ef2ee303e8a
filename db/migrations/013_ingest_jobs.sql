-- Ingest as background jobs (issue 45): a queue in Postgres, taken with SELECT ... FOR UPDATE SKIP LOCKED on
-- the service's own pool (provenance.jobs.queue), so any number of workers, in `serve` or standalone, share it.
CREATE TABLE ingest_jobs (
    id            text PRIMARY KEY,
    corpus        text NOT NULL,
    kind          text NOT NULL CONSTRAINT ingest_jobs_kind_check CHECK (kind IN ('add', 'remove', 'sync')),
    state         text NOT NULL DEFAULT 'queued'
        CONSTRAINT ingest_jobs_state_check CHECK (state IN ('queued', 'running', 'done', 'failed')),
    -- The key that asked for it (NULL for the command line).
    key_name      text,
    payload       jsonb NOT NULL DEFAULT '{}'::jsonb,
    progress      jsonb NOT NULL DEFAULT '{}'::jsonb,
    documents     jsonb NOT NULL DEFAULT '[]'::jsonb,
    error         text,
    worker        text,
    attempts      integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now(),
    started_at    timestamptz,
    -- A running job's worker touches this while it works; a job whose worker stopped touching it (killed)
    -- is taken again and resumes from what it staged.
    heartbeat_at  timestamptz,
    finished_at   timestamptz
);
-- One job at a time per corpus, held by the database itself: two workers that each find a different queued
-- job of one corpus can't both start theirs (the second's UPDATE violates this and it takes nothing).
CREATE UNIQUE INDEX ingest_jobs_one_running_per_corpus ON ingest_jobs (corpus) WHERE state = 'running';
CREATE INDEX ingest_jobs_queued_idx ON ingest_jobs (created_at, id) WHERE state = 'queued';
