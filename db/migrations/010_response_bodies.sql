-- Served responses keep one copy of each body (issue 48).
--
-- Every answered or refused response is kept for FEEDBACK_WINDOW_S so that a reader can rate it. A cached
-- answer served a thousand times a second is the same 7 kB document a thousand times over, but for its request
-- id, its total time and the stages met at the door (bot check, cache, rate limit, admission). Written whole,
-- one row each, the batched write parsed and compressed megabytes of jsonb a second on the cores that serve
-- the requests, and the cached path lost 19% of its throughput and 12x its p99. Now the body (with the
-- settings that answered) is written once per distinct digest, and each response is a small row: its
-- envelope (what differs per request) and the body's digest.

CREATE TABLE response_bodies (
    -- blake2b-128 of the settings and the body as encoded (provenance.feedback.responses).
    digest      bytea PRIMARY KEY,
    settings    jsonb NOT NULL,
    -- The response with its per-request fields at their defaults; the envelope puts them back.
    body        jsonb NOT NULL,
    -- Refreshed at most once an hour (RESPONSE_BODY_TOUCH_S), so that a hot body costs no write per flush;
    -- a body is removed once not served for the window plus that hour, when no row can still name it.
    last_served timestamptz NOT NULL
);
CREATE INDEX response_bodies_last_served_idx ON response_bodies (last_served);

CREATE TABLE served_responses (
    request_id      text PRIMARY KEY,
    question        text NOT NULL,
    corpus          text,
    corpus_version  text,
    status          text NOT NULL CHECK (status IN ('answered', 'refused')),
    reason          text,
    cached          boolean NOT NULL,
    -- No foreign key: the body is removed by age, after every row that names it (see last_served), and a key
    -- would cost a lookup and a row lock per response on the write-behind path.
    body_digest     bytea NOT NULL,
    -- requestId, cached, totalMs and the door's stages: {"stages": {"cache": ...}} is merged into the body's.
    envelope        jsonb NOT NULL,
    served_at       timestamptz NOT NULL
);
CREATE INDEX served_responses_served_idx ON served_responses (served_at);

-- What was kept before this migration: each response its own body, with an empty envelope.
INSERT INTO response_bodies (digest, settings, body, last_served)
SELECT DISTINCT ON (d) d, settings, response, max(served_at) OVER (PARTITION BY d)
FROM (SELECT sha256(convert_to(settings::text || response::text, 'UTF8')) AS d, settings, response, served_at
      FROM recent_responses) AS old
ON CONFLICT DO NOTHING;
INSERT INTO served_responses
    (request_id, question, corpus, corpus_version, status, reason, cached, body_digest, envelope, served_at)
SELECT request_id, question, corpus, corpus_version, status, reason, cached,
       sha256(convert_to(settings::text || response::text, 'UTF8')), '{}'::jsonb, served_at
FROM recent_responses;
DROP TABLE recent_responses;

-- The responses as they were returned, under the name readers (rating, exports, tests) have always used. One
-- table in FROM and the bodies in scalar subqueries, so that the view stays updatable in its plain columns
-- (served_at, say) as the table was.
CREATE VIEW recent_responses AS
SELECT r.request_id, r.question, r.corpus, r.corpus_version, r.status, r.reason, r.cached,
       (SELECT b.settings FROM response_bodies b WHERE b.digest = r.body_digest) AS settings,
       (SELECT (b.body || (r.envelope - 'stages'))
                   || jsonb_build_object('stages', (b.body -> 'stages') || coalesce(r.envelope -> 'stages', '{}'))
        FROM response_bodies b WHERE b.digest = r.body_digest) AS response,
       r.served_at
FROM served_responses r;
