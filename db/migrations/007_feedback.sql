-- Readers' "Was this right?" (POST /feedback, issue 36).
--
-- The corpus is kept as plain text, never a key into corpus_state: a corpus removed later must not take its
-- readers' verdicts with it, and `provenance feedback export` says that it is gone.

-- Every answered or refused /ask response as it was returned, kept FEEDBACK_WINDOW_S so that it can be rated;
-- a cached answer served again is another row under its own request id. Written in batches, off the request
-- path (provenance.feedback.ResponseLog).
CREATE TABLE recent_responses (
    request_id      text PRIMARY KEY,
    question        text NOT NULL,
    corpus          text,
    corpus_version  text,
    status          text NOT NULL CHECK (status IN ('answered', 'refused')),
    reason          text,
    cached          boolean NOT NULL,
    -- What answered: profile, models, retrieval and gate settings, so an exported case can say whether it
    -- was answered under other settings than today's.
    settings        jsonb NOT NULL,
    response        jsonb NOT NULL,
    served_at       timestamptz NOT NULL
);
CREATE INDEX recent_responses_served_idx ON recent_responses (served_at);

-- One verdict per client per request: a client's second verdict replaces its first. The client is an HMAC of
-- its address (or API key name), never the address. What was rated is copied from recent_responses, so a
-- verdict outlives the window in which the response could be rated.
CREATE TABLE feedback (
    request_id      text NOT NULL,
    client_hash     text NOT NULL,
    verdict         text NOT NULL CHECK (verdict IN ('right', 'wrong')),
    kind            text CHECK (kind IN ('wrong_answer', 'should_have_answered', 'other')),
    note            text NOT NULL DEFAULT '' CHECK (char_length(note) <= 500),
    question        text NOT NULL,
    corpus          text,
    corpus_version  text,
    status          text NOT NULL,
    reason          text,
    cached          boolean NOT NULL,
    settings        jsonb NOT NULL,
    response        jsonb NOT NULL,
    served_at       timestamptz NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_id, client_hash),
    CONSTRAINT feedback_kind_goes_with_wrong CHECK (verdict = 'wrong' OR kind IS NULL)
);
CREATE INDEX feedback_updated_idx ON feedback (updated_at);

-- The HMAC key for client identities when FEEDBACK_HMAC_KEY is not set: made once, shared by every worker,
-- and kept across restarts so that a client stays the same client.
CREATE TABLE feedback_secret (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    key         bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
